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
            "Message format v0/v1 is refused with CORRUPT_MESSAGE. The topic config "
            "`compression.type` accepts only `producer`: a broker that recompressed would have "
            "to re-encode every batch."
        ),
    ),
    Difference(
        api="Fetch",
        what="Fetch sessions (KIP-227) are refused, correctly.",
        why=(
            "Every Fetch response carries session id 0, so clients keep sending full fetch "
            "requests; an incremental fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND. "
            "Clients fall back on their own."
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
        api="Produce, InitProducerId, FindCoordinator",
        what="No transactions.",
        why=(
            "Produce and InitProducerId requests with a transactional id, transactional "
            "batches, and FindCoordinator for a transaction coordinator get "
            "TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients report as fatal. "
            "`isolation.level=read_committed` reads up to the high watermark."
        ),
    ),
    Difference(
        api="Produce",
        what="Produce v0-v2 are advertised but refused.",
        why=(
            "librdkafka before 2.11.1 turns compression off for a broker whose Produce range "
            "does not start at 0, so the range starts there; such requests (message format "
            "v0/v1) get UNSUPPORTED_VERSION for every partition."
        ),
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
        api="DescribeLogDirs, AlterReplicaLogDirs",
        what="Log directories.",
        why=(
            "One data directory per broker; `log.dirs` with several is not offered, so "
            "AlterReplicaLogDirs is not either. DescribeLogDirs describes that one directory "
            "(Kafka's `kafka-reassign-partitions --generate` and `kafka-log-dirs` ask for it)."
        ),
    ),
    Difference(
        api="ACLs",
        what="Not every request is authorized yet.",
        why=(
            "With authorizer.class.name set, Produce, Fetch, Metadata, CreateTopics, JoinGroup "
            "and the ACL and SCRAM admin APIs check Kafka's operations (docs/security.md); the "
            "other group APIs, ListOffsets, DeleteTopics, CreatePartitions, DeleteRecords, the "
            "config APIs and the controller's requests do not yet. DescribeGroups and "
            'DescribeCluster answer authorized operations with "not provided" (-2147483648). '
            "ACLs written by another broker are seen within 2 s (no /kafka-acl-changes)."
        ),
    ),
    Difference(
        api="SaslHandshake, SaslAuthenticate",
        what="PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 only; no re-authentication.",
        why=(
            "GSSAPI (Kerberos), OAUTHBEARER and delegation tokens are not offered: enabling them "
            "stops start-up with a message. KIP-368 re-authentication is not offered: "
            "SaslAuthenticate answers session_lifetime_ms=0 (as Kafka does when "
            "connections.max.reauth.ms is 0, its default), and a second SaslHandshake on an "
            "authenticated connection gets ILLEGAL_SASL_STATE. TLS key and trust stores are PEM "
            "only (KIP-651); JKS and PKCS12 are refused. SCRAM credential changes are not "
            "announced under /config/changes: brokers read /config/users at each "
            "authentication. Fetched records are copied into memory on TLS connections "
            "(sendfile cannot write through TLS), as Kafka's SSL channel does."
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
)
