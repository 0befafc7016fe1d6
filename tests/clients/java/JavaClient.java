// Apache Kafka's Java client (kafka-clients) against a cluster, in scenarios that run at once
// in one JVM (separated by "--" on the command line) and print what they saw as one JSON
// object on stdout, by scenario name; the tests judge it.
//
//   produce --bootstrap B --topic T --partitions P --count N
//       an idempotent producer (acks=all) sends N keyed records; a consumer reads them back
//   group --bootstrap B --topic T --group G --partitions P --count N
//       two members with cooperative-sticky assignment split the partitions, one leaves and
//       the other takes its partitions back, each committing what it consumed
//   admin --bootstrap B --topic T --group G
//       the AdminClient: topics, configs, the cluster, partition reassignments, preferred
//       leader elections, consumer group offsets, deleteRecords; each call's result or error
//
// Every wait is bounded; a scenario that cannot go on says so in "failure" and still prints.
//
// With SAMSA_CLIENT_CONFIG naming a properties file, its settings (security.protocol, ssl.*,
// sasl.*) go into every client.

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaClient {
    static final long WAIT_MS = 30_000;
    static final ObjectMapper JSON = new ObjectMapper();

    static final class Failed extends RuntimeException {
        Failed(String message) {
            super(message);
        }
    }

    public static void main(String[] argv) throws Exception {
        // Scenarios separated by "--" run at once, each on its own thread: one JVM start.
        Map<String, Object> out = new LinkedHashMap<>();
        List<Thread> running = new ArrayList<>();
        List<String> scenario = new ArrayList<>();
        for (int i = 0; i <= argv.length; i++) {
            if (i < argv.length && !argv[i].equals("--")) {
                scenario.add(argv[i]);
                continue;
            }
            if (scenario.isEmpty()) {
                continue;
            }
            String name = scenario.get(0);
            Map<String, String> flags = new HashMap<>();
            for (int j = 1; j + 1 < scenario.size(); j += 2) {
                flags.put(scenario.get(j).replaceFirst("^--", ""), scenario.get(j + 1));
            }
            Map<String, Object> found = new LinkedHashMap<>();
            found.put("failure", "did not finish");
            out.put(name, found);
            Thread t = new Thread(() -> run(name, flags, found), name);
            t.start();
            running.add(t);
            scenario = new ArrayList<>();
        }
        for (Thread t : running) {
            t.join(4 * WAIT_MS);
        }
        synchronized (out) {
            System.out.println(JSON.writeValueAsString(out));
        }
        System.out.flush();
        // Clients' threads are done with; do not wait on any that linger.
        System.exit(0);
    }

    static void run(String scenario, Map<String, String> flags, Map<String, Object> out) {
        try {
            switch (scenario) {
                case "produce" -> produce(flags, out);
                case "group" -> group(flags, out);
                case "admin" -> admin(flags, out);
                default -> throw new IllegalArgumentException("unknown scenario " + scenario);
            }
            out.put("failure", null);
        } catch (Failed e) {
            out.put("failure", e.getMessage());
        } catch (Exception e) {
            out.put("failure", e.toString());
        }
    }

    // -- shared --------------------------------------------------------------------------------

    interface Check {
        boolean ok() throws Exception;
    }

    /** Waits until the condition holds; a call that fails in the meantime counts as not yet. */
    static void await(Check condition, String what) throws InterruptedException {
        Object held;
        try {
            held = eventually(condition::ok, ok -> (Boolean) ok);
        } catch (InterruptedException e) {
            throw e;
        } catch (Exception e) {
            held = false;
        }
        if (!(Boolean) held) {
            throw new Failed("timed out waiting for " + what);
        }
    }

    static <T> T get(KafkaFuture<T> future) throws Exception {
        return future.get(WAIT_MS, TimeUnit.MILLISECONDS);
    }

    static String errorName(Throwable e) {
        Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return cause.getClass().getSimpleName();
    }

    /** The settings of the SAMSA_CLIENT_CONFIG file, if there is one, for every client. */
    static Properties secured(Properties p) {
        String path = System.getenv("SAMSA_CLIENT_CONFIG");
        if (path != null && !path.isEmpty()) {
            try (java.io.FileReader reader = new java.io.FileReader(path)) {
                Properties extra = new Properties();
                extra.load(reader);
                p.putAll(extra);
            } catch (java.io.IOException e) {
                throw new Failed("cannot read SAMSA_CLIENT_CONFIG " + path + ": " + e);
            }
        }
        return p;
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(secured(p));
    }

    static KafkaProducer<String, String> idempotentProducer(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "4096");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(secured(p));
    }

    static Properties consumerProperties(String bootstrap) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return secured(p);
    }

    /** Sends `count` records keyed k<i> with values <prefix>-<i>; the errors by name. */
    static Map<String, Integer> send(KafkaProducer<String, String> producer, String topic,
                                     Integer partition, String prefix, int count, AtomicInteger acked) {
        Map<String, Integer> errors = new TreeMap<>();
        for (int i = 0; i < count; i++) {
            producer.send(new ProducerRecord<>(topic, partition, "k" + i, prefix + "-" + i), (meta, e) -> {
                if (e == null) {
                    acked.incrementAndGet();
                } else {
                    synchronized (errors) {
                        errors.merge(errorName(e), 1, Integer::sum);
                    }
                }
            });
        }
        producer.flush();
        return errors;
    }

    static void createTopic(Admin admin, NewTopic topic) throws Exception {
        get(admin.createTopics(List.of(topic)).all());
    }

    static List<Map<String, Object>> partitionsOf(TopicDescription d) {
        List<Map<String, Object>> rows = new ArrayList<>();
        for (TopicPartitionInfo p : d.partitions()) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("partition", p.partition());
            row.put("leader", p.leader() == null ? -1 : p.leader().id());
            row.put("replicas", p.replicas().stream().map(Node::id).collect(Collectors.toList()));
            row.put("isr", p.isr().stream().map(Node::id).collect(Collectors.toList()));
            rows.add(row);
        }
        return rows;
    }

    // -- produce -------------------------------------------------------------------------------

    static void produce(Map<String, String> flags, Map<String, Object> out) throws Exception {
        String bootstrap = flags.get("bootstrap");
        String topic = flags.get("topic");
        int count = Integer.parseInt(flags.get("count"));
        int partitions = Integer.parseInt(flags.get("partitions"));
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, new NewTopic(topic, partitions, (short) 3));
        }
        AtomicInteger acked = new AtomicInteger();
        try (KafkaProducer<String, String> producer = idempotentProducer(bootstrap)) {
            out.put("errors", send(producer, topic, null, "v", count, acked));
        }
        out.put("acked", acked.get());

        Map<Integer, List<String>> read = new TreeMap<>();
        Properties p = consumerProperties(bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> all = new ArrayList<>();
            for (int i = 0; i < partitions; i++) {
                all.add(new TopicPartition(topic, i));
            }
            consumer.assign(all);
            consumer.seekToBeginning(all);
            AtomicInteger seen = new AtomicInteger();
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (seen.get() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    read.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.key() + "=" + r.value());
                    seen.incrementAndGet();
                }
            }
            out.put("end_offsets", consumer.endOffsets(all).entrySet().stream()
                    .collect(Collectors.toMap(e -> e.getKey().partition(), Map.Entry::getValue)));
        }
        out.put("read", read);
    }

    // -- group ---------------------------------------------------------------------------------

    /** A group member on its own thread, reporting its assignment changes and records. */
    static final class Member implements Runnable, ConsumerRebalanceListener {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final String topic;
        final Set<Integer> owned = new TreeSet<>();
        final List<Map<String, Object>> events = new ArrayList<>();
        final List<List<Object>> records = new ArrayList<>();
        volatile boolean stop;
        volatile String error;
        final Thread thread;

        Member(String name, String bootstrap, String topic, String group) {
            this.name = name;
            this.topic = topic;
            Properties p = consumerProperties(bootstrap);
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
            consumer = new KafkaConsumer<>(p);
            thread = new Thread(this, name);
            thread.start();
        }

        synchronized void event(String kind, Collection<TopicPartition> partitions) {
            Set<Integer> ids = partitions.stream().map(TopicPartition::partition).collect(Collectors.toCollection(TreeSet::new));
            if (kind.equals("assigned")) {
                owned.addAll(ids);
            } else {
                owned.removeAll(ids);
            }
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("event", kind);
            e.put("partitions", ids);
            events.add(e);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            event("assigned", partitions);
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            // What was consumed is committed before the partitions move on.
            if (!partitions.isEmpty()) {
                consumer.commitSync();
            }
            event("revoked", partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            event("lost", partitions);
        }

        synchronized Set<Integer> owned() {
            return new TreeSet<>(owned);
        }

        synchronized int consumed() {
            return records.size();
        }

        @Override
        public void run() {
            try {
                consumer.subscribe(List.of(topic), this);
                while (!stop) {
                    ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(100));
                    if (batch.isEmpty()) {
                        continue;
                    }
                    synchronized (this) {
                        for (ConsumerRecord<String, String> r : batch) {
                            records.add(List.of(r.partition(), r.offset(), r.value()));
                        }
                    }
                    consumer.commitSync();
                }
                // Leaves the group (LeaveGroup), so that the other member takes over at once.
                consumer.close(CloseOptions.timeout(Duration.ofSeconds(10)));
            } catch (Exception e) {
                error = e.toString();
            }
        }

        void leave() throws InterruptedException {
            stop = true;
            thread.join(WAIT_MS);
            if (thread.isAlive()) {
                throw new Failed(name + " did not leave the group in time");
            }
        }

        synchronized Map<String, Object> report() {
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("events", events);
            r.put("records", records);
            r.put("error", error);
            return r;
        }
    }

    static void group(Map<String, String> flags, Map<String, Object> out) throws Exception {
        String bootstrap = flags.get("bootstrap");
        String topic = flags.get("topic");
        String group = flags.get("group");
        int partitions = Integer.parseInt(flags.get("partitions"));
        int count = Integer.parseInt(flags.get("count"));
        Set<Integer> all = new TreeSet<>();
        for (int i = 0; i < partitions; i++) {
            all.add(i);
        }
        Map<String, Member> members = new LinkedHashMap<>();
        Map<String, Object> reports = new LinkedHashMap<>();
        out.put("members", reports);
        List<String> steps = new ArrayList<>();
        out.put("steps", steps);
        AtomicInteger acked = new AtomicInteger();
        try (Admin admin = admin(bootstrap); KafkaProducer<String, String> producer = idempotentProducer(bootstrap)) {
            createTopic(admin, new NewTopic(topic, partitions, (short) 3));
            Member a = new Member("a", bootstrap, topic, group);
            members.put("a", a);
            try {
                await(() -> a.owned().equals(all), "a to own every partition");
                steps.add("a owns every partition");
                send(producer, topic, null, "first", count, acked);
                Member b = new Member("b", bootstrap, topic, group);
                members.put("b", b);
                await(() -> {
                    Set<Integer> ao = a.owned(), bo = b.owned(), both = new TreeSet<>(ao);
                    both.addAll(bo);
                    return !ao.isEmpty() && !bo.isEmpty() && both.equals(all) && ao.size() + bo.size() == partitions;
                }, "a and b to split the partitions");
                steps.add("a and b split the partitions");
                send(producer, topic, null, "second", count, acked);
                await(() -> a.consumed() + b.consumed() >= 2 * count, "the first and second records consumed");
                steps.add("first and second records consumed");
                b.leave();
                await(() -> a.owned().equals(all), "a to own every partition again");
                steps.add("b left, a owns every partition");
                send(producer, topic, null, "third", count, acked);
                await(() -> a.consumed() + b.consumed() >= 3 * count, "the third records consumed");
                steps.add("third records consumed");
                a.leave();
                steps.add("a left");
            } finally {
                for (Member m : members.values()) {
                    m.stop = true;
                    m.thread.join(WAIT_MS);
                    reports.put(m.name, m.report());
                }
                out.put("acked", acked.get());
            }
            Map<TopicPartition, OffsetAndMetadata> committed =
                    get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (int i : all) {
                latest.put(new TopicPartition(topic, i), OffsetSpec.latest());
            }
            out.put("committed", committed.entrySet().stream()
                    .collect(Collectors.toMap(e -> e.getKey().partition(), e -> e.getValue().offset(), (x, y) -> x, TreeMap::new)));
            out.put("end", get(admin.listOffsets(latest).all()).entrySet().stream()
                    .collect(Collectors.toMap(e -> e.getKey().partition(), e -> e.getValue().offset(), (x, y) -> x, TreeMap::new)));
            ConsumerGroupDescription described = get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
            out.put("group_state", described.groupState().toString());
            out.put("assignor", described.partitionAssignor());
        }
    }

    // -- admin ---------------------------------------------------------------------------------

    interface Step {
        Object call() throws Exception;
    }

    /** The call's answer once it passes the check, or its last answer (or error) at the deadline.
     *  For what Admin.createTopics's javadoc warns of: for a few seconds after it returns, a
     *  broker other than the one that created the topics may not list or describe them yet. */
    static Object eventually(Step call, java.util.function.Predicate<Object> check) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (true) {
            try {
                Object answer = call.call();
                if (check.test(answer) || System.currentTimeMillis() > deadline) {
                    return answer;
                }
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
            }
            Thread.sleep(50);
        }
    }

    /** One admin call: its result under "result", or its error's class and message. */
    static void step(Map<String, Object> out, String name, Step step) {
        Map<String, Object> r = new LinkedHashMap<>();
        try {
            r.put("result", step.call());
            r.put("error", null);
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            r.put("error", cause.getClass().getSimpleName());
            r.put("message", cause.getMessage());
        }
        out.put(name, r);
    }

    static Map<String, Object> configs(Config config, String... names) {
        Map<String, Object> found = new TreeMap<>();
        for (String name : names) {
            ConfigEntry e = config.get(name);
            found.put(name, e == null ? null : List.of(String.valueOf(e.value()), e.source().toString()));
        }
        return found;
    }

    static Map<String, Object> electionResult(Map<TopicPartition, Optional<Throwable>> partitions) {
        Map<String, Object> r = new TreeMap<>();
        partitions.forEach((tp, error) -> r.put(tp.toString(), error.map(e -> e.getClass().getSimpleName()).orElse(null)));
        return r;
    }

    static void admin(Map<String, String> flags, Map<String, Object> out) throws Exception {
        String bootstrap = flags.get("bootstrap");
        String topic = flags.get("topic");
        String moved = topic + "-moved";
        String group = flags.get("group");
        TopicPartition t0 = new TopicPartition(topic, 0);
        TopicPartition t1 = new TopicPartition(topic, 1);
        TopicPartition m0 = new TopicPartition(moved, 0);
        TopicPartition m1 = new TopicPartition(moved, 1);
        ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        try (Admin admin = admin(bootstrap)) {
            step(out, "describe_cluster", () -> {
                DescribeClusterResult c = admin.describeCluster();
                Map<String, Object> r = new LinkedHashMap<>();
                r.put("cluster_id", get(c.clusterId()));
                r.put("controller", get(c.controller()).id());
                r.put("nodes", get(c.nodes()).stream().map(Node::id).sorted().collect(Collectors.toList()));
                return r;
            });
            step(out, "create_topics", () -> {
                NewTopic replicated = new NewTopic(topic, 3, (short) 3).configs(Map.of("retention.ms", "3600000"));
                NewTopic placed = new NewTopic(moved, Map.of(0, List.of(0, 1), 1, List.of(1, 0)));
                get(admin.createTopics(List.of(replicated, placed)).all());
                return null;
            });
            step(out, "create_existing", () -> {
                createTopic(admin, new NewTopic(topic, 3, (short) 3));
                return null;
            });
            step(out, "list_topics", () -> eventually(() -> get(admin.listTopics().names()).stream()
                    .filter(n -> n.startsWith(topic)).sorted().collect(Collectors.toList()),
                    names -> ((List<?>) names).size() == 2));
            step(out, "describe_topics", () -> eventually(() -> {
                Map<String, TopicDescription> d = get(admin.describeTopics(List.of(topic, moved)).allTopicNames());
                Map<String, Object> r = new TreeMap<>();
                d.forEach((name, description) -> r.put(name, partitionsOf(description)));
                // And by topic id, as Kafka 4's tools ask.
                TopicDescription byId = get(admin.describeTopics(
                        TopicCollection.ofTopicIds(List.of(d.get(topic).topicId()))).allTopicIds()).get(d.get(topic).topicId());
                r.put("by_id", List.of(byId.name(), partitionsOf(byId).size()));
                return r;
            }, described -> true));
            step(out, "describe_configs", () -> {
                ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "0");
                Map<ConfigResource, Config> d = get(admin.describeConfigs(List.of(topicResource, broker)).all());
                Map<String, Object> r = new LinkedHashMap<>();
                r.put("topic", configs(d.get(topicResource), "retention.ms", "min.insync.replicas", "cleanup.policy"));
                r.put("broker", configs(d.get(broker), "min.insync.replicas", "default.replication.factor", "num.partitions"));
                return r;
            });
            step(out, "alter_configs", () -> {
                get(admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET)))).all());
                get(admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE)))).all());
                Config c = get(admin.describeConfigs(List.of(topicResource)).all()).get(topicResource);
                return configs(c, "retention.ms", "max.message.bytes");
            });
            step(out, "alter_configs_invalid", () -> {
                get(admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all());
                return null;
            });
            // Partition 0 of the placed topic moves from brokers 0, 1 to 2, 1; partition 1 keeps
            // its brokers in another order, so its preferred leader changes to broker 0.
            step(out, "produce", () -> {
                AtomicInteger acked = new AtomicInteger();
                try (KafkaProducer<String, String> producer = idempotentProducer(bootstrap)) {
                    send(producer, moved, 0, "m", 50, acked);
                    send(producer, moved, 1, "m", 50, acked);
                    send(producer, topic, 0, "t", 10, acked);
                }
                return acked.get();
            });
            step(out, "alter_reassignments", () -> {
                get(admin.alterPartitionReassignments(Map.of(
                        m0, Optional.of(new NewPartitionReassignment(List.of(2, 1))),
                        m1, Optional.of(new NewPartitionReassignment(List.of(0, 1))))).all());
                return null;
            });
            step(out, "list_reassignments", () -> {
                Map<String, Object> r = new LinkedHashMap<>();
                Map<TopicPartition, PartitionReassignment> first = get(admin.listPartitionReassignments().reassignments());
                r.put("first", first.keySet().stream().map(TopicPartition::toString).sorted().collect(Collectors.toList()));
                await(() -> get(admin.listPartitionReassignments(Set.of(m0, m1)).reassignments()).isEmpty(),
                        "the reassignments to finish");
                r.put("after", List.of());
                return r;
            });
            // Metadata reaches every broker after the controller finishes, as in Kafka: the
            // description shown is the one that showed both reassignments done, since a second
            // describe may reach a broker the metadata has not reached yet (seen once in make test).
            step(out, "after_reassignment", () -> partitionsOf((TopicDescription) eventually(
                    () -> get(admin.describeTopics(List.of(moved)).allTopicNames()).get(moved),
                    d -> ((TopicDescription) d).partitions().stream()
                            .allMatch(p -> p.replicas().size() == 2 && p.isr().size() == 2))));
            step(out, "elect_preferred", () -> electionResult(get(admin.electLeaders(ElectionType.PREFERRED, Set.of(m1)).partitions())));
            step(out, "elect_again", () -> electionResult(get(admin.electLeaders(ElectionType.PREFERRED, Set.of(m1)).partitions())));
            // As after the reassignment: the election is done at the controller, and a
            // describe may reach a broker its metadata has not reached yet.
            step(out, "after_election", () -> partitionsOf((TopicDescription) eventually(
                    () -> get(admin.describeTopics(List.of(moved)).allTopicNames()).get(moved),
                    d -> ((TopicDescription) d).partitions().get(1).leader().id() == 0)));
            step(out, "read_moved", () -> {
                Properties p = consumerProperties(bootstrap);
                try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
                    consumer.assign(List.of(m0, m1));
                    consumer.seekToBeginning(List.of(m0, m1));
                    Map<Integer, Integer> counts = new TreeMap<>();
                    long deadline = System.currentTimeMillis() + WAIT_MS;
                    while (counts.values().stream().mapToInt(Integer::intValue).sum() < 100 && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                            counts.merge(r.partition(), 1, Integer::sum);
                        }
                    }
                    return counts;
                }
            });
            step(out, "alter_group_offsets", () -> {
                get(admin.alterConsumerGroupOffsets(group, Map.of(t0, new OffsetAndMetadata(5, "five"), t1, new OffsetAndMetadata(0))).all());
                return null;
            });
            step(out, "list_group_offsets", () -> {
                Map<String, Object> r = new TreeMap<>();
                get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()).forEach(
                        (tp, o) -> r.put(tp.toString(), List.of(o.offset(), o.metadata())));
                return r;
            });
            step(out, "list_groups", () -> get(admin.listGroups().all()).stream()
                    .filter(g -> g.groupId().equals(group))
                    .map(g -> List.of(g.protocol(), g.type().map(Object::toString).orElse("")))
                    .collect(Collectors.toList()));
            step(out, "describe_group", () -> {
                ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
                return List.of(d.groupState().toString(), d.members().size());
            });
            step(out, "delete_records", () -> get(admin.deleteRecords(Map.of(t0, RecordsToDelete.beforeOffset(4)))
                    .lowWatermarks().get(t0)).lowWatermark());
            step(out, "earliest_after_delete", () -> get(admin.listOffsets(Map.of(t0, OffsetSpec.earliest())).all()).get(t0).offset());
            step(out, "delete_topics", () -> {
                get(admin.deleteTopics(List.of(topic, moved)).all());
                await(() -> {
                    Set<String> names = new HashSet<>(get(admin.listTopics().names()));
                    return !names.contains(topic) && !names.contains(moved);
                }, "the topics gone");
                return null;
            });
        }
    }
}
