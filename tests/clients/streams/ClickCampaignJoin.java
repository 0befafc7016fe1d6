// A Kafka Streams application (at-least-once): ad clicks joined with the campaigns they belong
// to, and clicks counted per campaign.
//
//   clicks     (key user_id, value the click as JSON, with its campaign_id)
//     -> re-keyed by campaign_id through the repartition topic <app>-clicks-by-campaign-repartition
//     -> joined with the KTable of campaigns (key campaign_id, value JSON; its store "campaigns"
//        is logged to <app>-campaigns-changelog) -> enriched: the click with its advertiser
//     -> counted per campaign (store "click-counts", logged to <app>-click-counts-changelog)
//        -> counts: campaign_id -> the running count, as text
//
// Usage: java ClickCampaignJoin.java BOOTSTRAP APPLICATION_ID STATE_DIR CLICKS CAMPAIGNS
//        ENRICHED COUNTS [PROCESSING_GUARANTEE [GROUP_PROTOCOL]]
// (at_least_once and Streams' default group protocol, classic, unless given)
// It prints JSON lines on stdout: {"state": ...} at each state change and {"restored": store,
// "topic": changelog, "partition": p, "records": n} when a store partition has been restored.
// SIGTERM closes it cleanly; it exits 1 if a stream thread dies.

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.processor.StateRestoreListener;

public class ClickCampaignJoin {
    static final ObjectMapper JSON = new ObjectMapper();

    static synchronized void say(ObjectNode line) {
        System.out.println(line.toString());
        System.out.flush();
    }

    static String field(String json, String name) {
        try {
            return JSON.readTree(json).path(name).asText();
        } catch (Exception e) {
            throw new IllegalArgumentException("not a JSON object: " + json, e);
        }
    }

    static String enrich(String click, String campaign) {
        try {
            ObjectNode out = (ObjectNode) JSON.readTree(click);
            out.put("advertiser", JSON.readTree(campaign).path("advertiser").asText());
            return out.toString();
        } catch (Exception e) {
            throw new IllegalArgumentException("bad click or campaign", e);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 7 || args.length > 9) {
            System.err.println("usage: ClickCampaignJoin BOOTSTRAP APPLICATION_ID STATE_DIR"
                + " CLICKS CAMPAIGNS ENRICHED COUNTS [PROCESSING_GUARANTEE [GROUP_PROTOCOL]]");
            System.exit(2);
        }
        String clicksTopic = args[3], campaignsTopic = args[4];
        String enrichedTopic = args[5], countsTopic = args[6];

        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[2]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
            args.length > 7 ? args[7] : StreamsConfig.AT_LEAST_ONCE);
        if (args.length > 8) {
            p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args[8]);
        }
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // Commit often and forward every update (no record cache), so that what the test reads
        // follows what was processed within a second.
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // Delete what has been consumed from the repartition topic (DeleteRecords) after every
        // commit, not every 30 s.
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 0);
        // A killed instance leaves the group after 6 s, not Streams' default 45 s.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);

        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> campaigns = builder.table(
            campaignsTopic, Consumed.with(Serdes.String(), Serdes.String()), Materialized.as("campaigns"));
        KStream<String, String> clicks = builder
            .stream(clicksTopic, Consumed.with(Serdes.String(), Serdes.String()))
            .selectKey((user, click) -> field(click, "campaign_id"))
            .repartition(Repartitioned.<String, String>as("clicks-by-campaign"));
        clicks.join(campaigns, ClickCampaignJoin::enrich, Joined.as("click-campaign-join"))
            .to(enrichedTopic, Produced.with(Serdes.String(), Serdes.String()));
        clicks.groupByKey(Grouped.as("clicks-per-campaign"))
            .count(Materialized.as("click-counts"))
            .toStream()
            .mapValues(n -> Long.toString(n))
            .to(countsTopic, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        AtomicBoolean failed = new AtomicBoolean(false);
        streams.setStateListener((now, before) -> {
            say(JSON.createObjectNode().put("state", now.toString()));
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {}

            public void onBatchRestored(TopicPartition tp, String store, long end, long n) {}

            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                say(JSON.createObjectNode()
                    .put("restored", store).put("topic", tp.topic()).put("partition", tp.partition())
                    .put("records", total));
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            failed.set(true);
            StringBuilder causes = new StringBuilder();
            for (Throwable t = e; t != null; t = t.getCause()) {
                causes.append(causes.length() == 0 ? "" : " <- ").append(t);
            }
            say(JSON.createObjectNode().put("error", causes.toString()));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            done.countDown();
        }));
        streams.start();
        done.await();
        streams.close();
        System.exit(failed.get() ? 1 : 0);
    }
}
