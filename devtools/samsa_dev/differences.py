"""What Samsa does differently from Apache Kafka, observably, and why: the data behind the
"Where Samsa differs" section of docs/protocol.md (rendered by `make docs`).

The differential suite (tests/compat) names its checks; an entry lists the checks in which the
difference shows. A check whose results differ must be listed here, and a listed check whose
results agree fails too, so the list stays true.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Difference:
    api: str  # the APIs concerned, by Kafka's names ("all" for the broker as a whole)
    what: str  # the difference, in one sentence
    why: str  # the reason, and what a user sees
    checks: tuple[str, ...] = ()  # the compat checks where it shows


DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        api="Produce",
        what="Records are stored as sent.",
        why=(
            "Batches (magic v2 only) are CRC-checked and stored as the producer's bytes; only "
            "the base offset, the partition leader epoch and, for "
            "`message.timestamp.type=LogAppendTime`, the batch's max timestamp are patched. "
            "Message format v0/v1 is refused with INVALID_RECORD, as Kafka 4 does. A topic "
            "whose `compression.type` names a codec (not `producer`, the default) has a batch "
            "sent with another codec re-encoded with its own, as Kafka does; a compacted topic "
            "reads each batch's records for their keys, and a batch whose header shows a record "
            "further ahead than message.timestamp.after.max.ms (or any batch, on a topic with a "
            "finite message.timestamp.before.max.ms) has its records read for their "
            "timestamps. A batch its producer marked LogAppendTime (no client does) is refused "
            "record by record on a LogAppendTime topic, as in Kafka, but stored as sent on a "
            "CreateTime topic whose bounds its max timestamp is within, where Kafka stores it "
            "as CreateTime."
        ),
        checks=("produce.timestamp.stored_marked",),
    ),
    Difference(
        api="Fetch",
        what="Fetch sessions (KIP-227) between brokers only.",
        why=(
            "A follower's fetch opens a session on its leader, and its incremental fetches and "
            "their answers carry only what changed. A consumer's Fetch is answered with session "
            "id 0, so clients keep sending full fetch requests, and an incremental fetch naming "
            "a session gets FETCH_SESSION_ID_NOT_FOUND. Clients fall back on their own; Kafka "
            "would give the Java consumer a session."
        ),
    ),
    Difference(
        api="InitProducerId, Produce",
        what="Idempotent producers, as Kafka 2.5+.",
        why=(
            "`enable.idempotence=true` (the default of current clients) works: InitProducerId "
            "hands out producer ids that stay unique across restarts, and each partition keeps "
            "every producer's epoch and last five batches, so a retried batch is answered with "
            "the offset it got the first time and is not written again. A gap in the sequence "
            "numbers gets OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch INVALID_PRODUCER_EPOCH; a "
            "producer the partition does not know may start at any sequence (KIP-360), so "
            "UNKNOWN_PRODUCER_ID is never returned. Two differences: an InitProducerId that "
            "gives the producer's current id and epoch (v3+) gets the same id at the next "
            "epoch, fencing what the producer still has in flight, where Kafka hands an "
            "idempotent producer a new id; and the `.snapshot` files keep all five batches of "
            "each producer (Kafka's keep the last), so a retry is still recognised after a "
            "restart. Idle producers are forgotten after `producer.id.expiration.ms`."
        ),
    ),
    Difference(
        api=(
            "InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, "
            "ListTransactions"
        ),
        what="Transactions with Kafka's coordinator, in transaction version 1 (KIP-98, KIP-447).",
        why=(
            "Transactional ids live in the compacted, replicated `__transaction_state` topic "
            "(created on first use) and are coordinated by its partitions' leaders; "
            "InitProducerId fences the id's older producer (PRODUCER_FENCED) after aborting its "
            "open transaction, EndTxn is answered once PrepareCommit/PrepareAbort is durable and "
            "the markers follow, transactions left open past transaction.timeout.ms are aborted "
            "with an epoch bump, and TxnOffsetCommit's offsets count when the commit marker "
            "reaches the group's partition. Not served: KIP-890's transaction version 2 "
            "(EndTxn v5, AddPartitionsToTxn v5, TxnOffsetCommit v5: clients use v4 and add "
            "partitions first, as with Kafka 3.x), KIP-939's keepPreparedTxn (InitProducerId v6) "
            "and ListTransactions v2's transactional id pattern."
        ),
        checks=(
            "api_versions.add_partitions_to_txn",
            "api_versions.end_txn",
            "api_versions.txn_offset_commit",
            "api_versions.list_transactions",
        ),
    ),
    Difference(
        api="Produce, WriteTxnMarkers, Fetch, ListOffsets, DescribeProducers",
        what="Transactions on the partitions, as Kafka 3.9 with one difference.",
        why=(
            "Transactional batches are accepted from a request whose transactional id the "
            "principal may WRITE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a plain batch "
            "from a producer with a transaction open is INVALID_TXN_STATE, an old epoch "
            "INVALID_PRODUCER_EPOCH. WriteTxnMarkers appends commit and abort markers as "
            "leader and answers once the ISR has them; the last stable offset (the first "
            "offset of the earliest open transaction, held until its marker is below the "
            "high watermark) bounds read_committed Fetch and ListOffsets, and read_committed "
            "fetches carry the aborted transactions from the `.txnindex` files, which are "
            "rebuilt on recovery. The log cleaner removes aborted records, and markers once "
            "their transaction has no records left and delete.retention.ms has passed. As in "
            "Kafka 3.6+ (KIP-890, transaction.partition.verification.enable, on by default), a "
            "transaction's first batch on a partition waits for its coordinator to confirm "
            "(AddPartitionsToTxn v4 verify-only) that the partition was added; one that was "
            "not is refused with INVALID_TXN_STATE up to Produce v10 and TRANSACTION_ABORTABLE "
            "from v11, and nothing is appended; a marker of the producer written while the "
            "coordinator was asked voids its answer (Kafka's verification guard). A "
            "transaction's first TxnOffsetCommit to its group's __consumer_offsets partition "
            "is verified the same way, as in Kafka, though without the guard. The "
            "difference: Produce v12 is verified like v11 (Kafka 4 adds the partition itself "
            "for a transaction version 2 producer, which Samsa's coordinator does not serve). "
            "WriteTxnMarkers "
            "is served at Kafka 3.9's versions 0-1; Kafka 4 serves 1-2, v2 carrying the "
            "transaction version of KIP-890's second part, which Samsa's coordinator does "
            "not use."
        ),
        checks=("api_versions.write_txn_markers",),
    ),
    Difference(
        api="LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, AlterPartition",
        what="ZooKeeper mode, with Kafka 3.x's controller-to-broker APIs.",
        why=(
            "A cluster uses ZooKeeper and a controller as Kafka did before KRaft. LeaderAndIsr "
            "(v6), StopReplica (v3), UpdateMetadata (v7) and ControlledShutdown (v3) are spoken "
            "in one flexible version each, laid out as Kafka 3.x lays them out; leaders propose "
            "ISR changes with AlterPartition (v2), so a broker never writes partition state "
            "itself. Every controller write to ZooKeeper is a transaction that checks "
            "`/controller_epoch`. OffsetCommit and OffsetFetch stop at v9 (v10 names topics by "
            "id)."
        ),
        checks=(
            "api_versions.4",
            "api_versions.5",
            "api_versions.6",
            "api_versions.7",
            "api_versions.alter_partition",
            "api_versions.describe_quorum",
            "api_versions.update_features",
            "api_versions.unregister_broker",
            "api_versions.add_raft_voter",
            "api_versions.remove_raft_voter",
        ),
    ),
    Difference(
        api="Metadata",
        what="A dead broker leaves the metadata before its ZooKeeper session ends.",
        why=(
            "Kafka's ZooKeeper controller waits for the session to expire; Samsa's probes find "
            "a killed broker's port closed within a second, so its leaderships move and it "
            "drops out of Metadata's broker list while `/brokers/ids/<id>` still exists (as a "
            "KRaft controller fences a broker that misses its heartbeats). A dead controller's "
            "`/controller` is removed by the other brokers for the same reason. "
            "`broker.liveness.probe.interval.ms=0` restores Kafka's behaviour."
        ),
    ),
    Difference(
        api="all",
        what="Standalone mode.",
        why=(
            "Without `zookeeper.connect`, one broker keeps its metadata in `samsa- "
            "metadata.json` in its data directory and leads every partition; `acks=all` acts as "
            "`acks=1` while a partition has one replica."
        ),
    ),
    Difference(
        api="AlterReplicaLogDirs",
        what="Log directories.",
        why=(
            "One data directory per broker; `log.dirs` with several is not offered, so "
            "AlterReplicaLogDirs is not either. DescribeLogDirs describes that one directory "
            "(Kafka's `kafka-reassign-partitions --generate` and `kafka-log-dirs` ask for it)."
        ),
        checks=("api_versions.describe_log_dirs", "api_versions.alter_replica_log_dirs"),
    ),
    Difference(
        api="SaslHandshake, SaslAuthenticate",
        what="PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 only.",
        why=(
            "GSSAPI (Kerberos), OAUTHBEARER and delegation tokens are not offered: enabling them "
            "stops start-up with a message. TLS key and trust stores are PEM "
            "only (KIP-651); JKS and PKCS12 are refused. SCRAM credential changes are not "
            "announced under /config/changes: brokers read /config/users at each "
            "authentication. Fetched records are copied into memory on TLS connections "
            "(sendfile cannot write through TLS), as Kafka's SSL channel does."
        ),
        checks=(
            "api_versions.create_delegation_token",
            "api_versions.renew_delegation_token",
            "api_versions.expire_delegation_token",
            "api_versions.describe_delegation_token",
        ),
    ),
    Difference(
        api="ApiVersions, UpdateFeatures",
        what="No feature flags.",
        why=(
            "ApiVersions lists no supported or finalized features, so `kafka-features "
            "describe` prints nothing (KRaft Kafka lists `metadata.version` and the other "
            "features)."
        ),
    ),
    Difference(
        api="DescribeClientQuotas, AlterClientQuotas",
        what="controller_mutation_rate and connection_creation_rate are stored, not enforced.",
        why=(
            "producer_byte_rate, consumer_byte_rate and request_percentage are enforced as "
            "Kafka enforces them; controller_mutation_rate and an ip's "
            "connection_creation_rate are validated, stored and described but not enforced. "
            "request_percentage counts a request's time on the broker's one event loop (100 is "
            "all of it) before it first waits, where Kafka counts handler-thread time; "
            "ApiVersions and SASL requests are exempt as well as brokers' own. An alteration "
            "is written to ZooKeeper by the broker that receives it, and described from there, "
            "so a describe right after it on any broker sees it (KRaft Kafka's brokers learn it "
            "from the metadata log a moment later)."
        ),
    ),
    Difference(
        api="JoinGroup",
        what="A group whose metadata cannot be stored is not formed.",
        why=(
            "A JoinGroup that would make the group's record in __consumer_offsets certainly "
            "larger than `message.max.bytes` (counting each member's smallest protocol "
            "metadata) gets GROUP_MAX_SIZE_REACHED, and the group goes on without that member. "
            "Kafka lets such a group form, then fails its every SyncGroup with "
            "UNKNOWN_SERVER_ERROR."
        ),
    ),
    Difference(
        api="all",
        what="Errors close the connection where Kafka does.",
        why=(
            "An unknown API key, an unsupported version (except ApiVersions, answered with a "
            "v0 UNSUPPORTED_VERSION response), a frame larger than `socket.request.max.bytes`, "
            "or bytes that do not decode. Other connections are unaffected."
        ),
    ),
    Difference(
        api="Produce",
        what=("An acks=all Produce does not hold its connection while it waits for the ISR."),
        why=(
            "Kafka handles one request per connection at a time, so a client pipelining small "
            "acks=all requests waits one replication round trip per request. Samsa appends a "
            "request's records, then goes on to the requests behind it while the ISR catches up "
            "(at most 128 such answers owed per connection); answers still leave in request "
            "order, and the appends happen in arrival order, so idempotent sequences and "
            "ordering are as in Kafka."
        ),
    ),
    Difference(
        api="Produce, OffsetCommit, OffsetFetch",
        what="The versions that name topics by id are not served.",
        why=(
            "Produce v13 and OffsetCommit and OffsetFetch v10 name topics by their ids "
            "(KIP-516); ApiVersions advertises the versions before them, so clients use those."
        ),
        checks=("api_versions.produce", "api_versions.offset_commit", "api_versions.offset_fetch"),
    ),
    Difference(
        api="ConsumerGroupHeartbeat, ShareGroup*, StreamsGroup*",
        what="Only classic consumer groups.",
        why=(
            "KIP-848's consumer groups, share groups (KIP-932) and streams groups (KIP-1071) are "
            "not offered and their APIs are not advertised, so clients use the classic group "
            "protocol, as with Kafka before 4.0 (group.protocol=consumer fails at once)."
        ),
        checks=tuple(
            f"api_versions.{n}"
            for n in (
                "consumer_group_heartbeat",
                "consumer_group_describe",
                "share_group_heartbeat",
                "share_group_describe",
                "share_fetch",
                "share_acknowledge",
                "initialize_share_group_state",
                "read_share_group_state",
                "write_share_group_state",
                "delete_share_group_state",
                "read_share_group_state_summary",
                "describe_share_group_offsets",
                "alter_share_group_offsets",
                "delete_share_group_offsets",
                "streams_group_heartbeat",
                "streams_group_describe",
            )
        ),
    ),
    Difference(
        api="DescribeTopicPartitions, ListConfigResources",
        what="Two newer read-only admin APIs are not served.",
        why=(
            "DescribeTopicPartitions (KIP-966) and ListConfigResources are not advertised: the "
            "Java AdminClient falls back on Metadata to describe topics; listing client-metrics "
            "resources is not possible."
        ),
        checks=("api_versions.describe_topic_partitions", "api_versions.list_config_resources"),
    ),
    Difference(
        api="DescribeConfigs",
        what="Topic configs of features Samsa lacks are not listed.",
        why=(
            "Tiered storage (remote.storage.enable, remote.log.*, local.retention.*) and the "
            "replication throttles' replica lists are not topic configs here; DescribeConfigs "
            "lists only what the broker acts on."
        ),
        checks=tuple(
            f"describe_configs.topic.{n}"
            for n in (
                "follower.replication.throttled.replicas",
                "leader.replication.throttled.replicas",
                "local.retention.bytes",
                "local.retention.ms",
                "remote.log.copy.disable",
                "remote.log.delete.on.disable",
                "remote.storage.enable",
            )
        ),
    ),
    Difference(
        api="DescribeConfigs",
        what="Synonyms and sources differ in detail.",
        why=(
            "A topic config's synonyms list every broker key that could set it, with "
            "DEFAULT_CONFIG where none is set (Kafka omits some of them); KRaft Kafka sets "
            "min.insync.replicas as a dynamic cluster default when it is formatted, Samsa "
            "reports Kafka's static default. Broker keys that Kafka may change at run time but "
            "Samsa reads only at start are read-only here (the listeners' TLS and SASL settings "
            "among them: Kafka reloads key stores and mechanisms in place), and a few broker "
            "keys report the "
            "value that was configured, not Kafka's placeholders (log.dir, listener names)."
        ),
        checks=(
            "describe_configs.topic.flush.ms",
            "describe_configs.topic.min.insync.replicas",
            "describe_configs.topic.retention.ms",
            "describe_configs.topic.segment.jitter.ms",
            "describe_configs.topic.segment.ms",
            "describe_configs.broker.inter.broker.listener.name",
            "describe_configs.broker.listener.security.protocol.map",
            "describe_configs.broker.log.cleaner.backoff.ms",
            "describe_configs.broker.log.cleaner.dedupe.buffer.size",
            "describe_configs.broker.log.cleaner.io.buffer.load.factor",
            "describe_configs.broker.log.cleaner.io.buffer.size",
            "describe_configs.broker.log.cleaner.io.max.bytes.per.second",
            "describe_configs.broker.log.cleaner.threads",
            "describe_configs.broker.log.dir",
            "describe_configs.broker.sasl.enabled.mechanisms",
            "describe_configs.broker.sasl.jaas.config",
            "describe_configs.broker.ssl.truststore.type",
            "describe_configs.broker.ssl.truststore.password",
            "describe_configs.broker.ssl.truststore.location",
            "describe_configs.broker.ssl.truststore.certificates",
            "describe_configs.broker.ssl.protocol",
            "describe_configs.broker.ssl.keystore.type",
            "describe_configs.broker.ssl.keystore.password",
            "describe_configs.broker.ssl.keystore.location",
            "describe_configs.broker.ssl.keystore.key",
            "describe_configs.broker.ssl.keystore.certificate.chain",
            "describe_configs.broker.ssl.key.password",
            "describe_configs.broker.ssl.endpoint.identification.algorithm",
            "describe_configs.broker.ssl.enabled.protocols",
            "describe_configs.broker.ssl.client.auth",
            "describe_configs.broker.ssl.cipher.suites",
            "describe_configs.broker.security.inter.broker.protocol",
            "describe_configs.broker.sasl.mechanism.inter.broker.protocol",
            "describe_configs.broker.log.preallocate",
            "describe_configs.broker.log.roll.jitter.ms",
            "describe_configs.broker.min.insync.replicas",
        ),
    ),
    Difference(
        api="ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments",
        what="Controller requests are answered by the controller only.",
        why=(
            "Sent to a broker that is not the controller they get NOT_CONTROLLER, as in Kafka "
            "before KRaft; clients (the Java AdminClient, librdkafka, kafka-python) send them to "
            "the controller that Metadata names and retry there. KRaft Kafka names a random "
            "broker and forwards."
        ),
        checks=("cluster.elect_at_non_controller",),
    ),
)
