// What Apache Kafka's Java producer and consumer (kafka-clients) see of two things a broker
// does inside a producer's batch: the topic's compression.type, and refusing some of a batch's
// records (KIP-467). Prints one JSON object on stdout; the tests (tests/clients, tests/compat)
// judge it, against Samsa and against Apache Kafka alike.
//
//   codecs --bootstrap B --topics T1,T2,... --compression C --count N --expect M
//       a producer with compression.type=C sends N records (key java-<i>, value v-<i>, header
//       i=<i>) to each topic's partition 0; a consumer then reads M records of each topic
//       back: each as "key=value|header=value...", and the producer's errors, by exception
//   keyless --bootstrap B --topic T --count N
//       a producer sends N records in one batch (a long linger and a large batch size), every
//       tenth without a key; what each record's callback got: "ok" or the exception's class and
//       message
//   ahead --bootstrap B --topic T --count N --ahead-ms A
//       the same, every record with a key and every tenth with a timestamp A ms ahead of the
//       producer's clock
//
// Every wait is bounded.

import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ProduceChecks {
    static final long WAIT_MS = 30_000;

    public static void main(String[] argv) throws Exception {
        Map<String, String> flags = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            flags.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        Map<String, Object> out = switch (argv[0]) {
            case "codecs" -> codecs(flags);
            case "keyless" -> oneBatch(flags, 0);
            case "ahead" -> oneBatch(flags, Long.parseLong(flags.get("ahead-ms")));
            default -> throw new IllegalArgumentException("unknown scenario " + argv[0]);
        };
        System.out.println(new ObjectMapper().writeValueAsString(out));
        System.out.flush();
        System.exit(0);
    }

    static KafkaProducer<String, String> producer(String bootstrap, Map<String, String> extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static String failure(Exception e) {
        Throwable cause = e.getCause() != null ? e.getCause() : e;
        return cause.getClass().getSimpleName() + ": " + cause.getMessage();
    }

    // -- codecs --------------------------------------------------------------------------------

    static Map<String, Object> codecs(Map<String, String> flags) throws Exception {
        String bootstrap = flags.get("bootstrap");
        int count = Integer.parseInt(flags.get("count"));
        String[] topics = flags.get("topics").split(",");
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, Integer> errors = new TreeMap<>();
        try (KafkaProducer<String, String> producer = producer(
                bootstrap, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, flags.get("compression")))) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (String topic : topics) {
                for (int i = 0; i < count; i++) {
                    ProducerRecord<String, String> record =
                        new ProducerRecord<>(topic, 0, "java-" + i, "v-" + i);
                    record.headers().add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                    sent.add(producer.send(record));
                }
            }
            for (Future<RecordMetadata> f : sent) {
                try {
                    f.get(WAIT_MS, TimeUnit.MILLISECONDS);
                } catch (Exception e) {
                    errors.merge(failure(e), 1, Integer::sum);
                }
            }
        }
        out.put("errors", errors);
        Map<String, List<String>> read = new LinkedHashMap<>();
        for (String topic : topics) {
            read.put(topic, readAll(bootstrap, topic, Integer.parseInt(flags.get("expect"))));
        }
        out.put("read", read);
        return out;
    }

    static List<String> readAll(String bootstrap, String topic, int count) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> rows = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (rows.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    StringBuilder row = new StringBuilder(r.key() + "=" + r.value());
                    for (Header h : r.headers()) {
                        row.append("|").append(h.key()).append("=").append(
                            h.value() == null ? "null" : new String(h.value(), StandardCharsets.UTF_8));
                    }
                    rows.add(row.toString());
                }
            }
        }
        return rows;
    }

    // -- keyless, ahead -------------------------------------------------------------------------

    // Every tenth record without a key (aheadMs 0), or with a timestamp aheadMs ahead.
    static Map<String, Object> oneBatch(Map<String, String> flags, long aheadMs) throws Exception {
        String bootstrap = flags.get("bootstrap");
        String topic = flags.get("topic");
        int count = Integer.parseInt(flags.get("count"));
        // One batch: the records are all sent before the linger ends, and the batch holds them.
        Map<String, String> oneBatch = Map.of(
            ProducerConfig.LINGER_MS_CONFIG, "2000",
            ProducerConfig.BATCH_SIZE_CONFIG, "1048576");
        List<String> results = new ArrayList<>();
        try (KafkaProducer<String, String> producer = producer(bootstrap, oneBatch)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                boolean tenth = i % 10 == 0;
                String key = tenth && aheadMs == 0 ? null : "k" + i;
                Long timestamp = tenth && aheadMs != 0 ? System.currentTimeMillis() + aheadMs : null;
                sent.add(producer.send(new ProducerRecord<>(topic, 0, timestamp, key, "v-" + i)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                try {
                    f.get(WAIT_MS, TimeUnit.MILLISECONDS);
                    results.add("ok");
                } catch (Exception e) {
                    results.add(failure(e));
                }
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("results", results);
        return out;
    }
}
