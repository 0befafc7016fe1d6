// A transactional consume-process-produce application with Apache Kafka's Java client, run as
// its own process by the exactly-once kill loop (broker_image/tests/eos_support.py), the Java
// twin of broker_image/tests/eos_app.py:
//
//   EosApp BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID
//
// It reads INPUT (read_committed), writes each value prefixed with "out-" to the same
// partition of OUTPUT, and commits the consumed offsets in the same transaction, a poll's
// records at a time. It prints "ready" once its producer is initialised and runs until killed;
// the next instance's initTransactions aborts whatever transaction the killed one left open.

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class EosApp {
    public static void main(String[] args) throws InterruptedException {
        String bootstrap = args[0], source = args[1], sink = args[2], group = args[3];
        String txnId = args[4];
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        // Static membership (KIP-345): the next instance takes the killed one's partitions at
        // once instead of after its session timeout.
        c.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, txnId);
        c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        c.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "17");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
                KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            consumer.subscribe(List.of(source));
            System.out.println("ready");
            System.out.flush();
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) {
                    continue;
                }
                try {
                    producer.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<String, String> r : records) {
                        producer.send(new ProducerRecord<>(sink, r.partition(), null, "out-" + r.value()));
                        offsets.put(
                                new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1));
                    }
                    // Processing takes time while the transaction is open, as real work does,
                    // so that kills land inside transactions and not only between them.
                    producer.flush();
                    Thread.sleep(100);
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    producer.commitTransaction();
                } catch (ProducerFencedException e) {
                    // Another instance has the transactional id: this one must stop.
                    throw e;
                } catch (KafkaException e) {
                    // Abortable (a rebalance, a coordinator move): abort, and read again from
                    // the group's committed offsets, as Kafka's EOS examples do.
                    System.err.println("aborting: " + e);
                    producer.abortTransaction();
                    for (TopicPartition tp : consumer.assignment()) {
                        OffsetAndMetadata committed =
                                consumer.committed(java.util.Set.of(tp)).get(tp);
                        if (committed != null) {
                            consumer.seek(tp, committed.offset());
                        } else {
                            consumer.seekToBeginning(List.of(tp));
                        }
                    }
                }
            }
        }
    }
}
