"""The handler table: every API this broker implements, with its version range."""

from __future__ import annotations

from types import ModuleType

from samsa.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    api_versions,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    stop_replica,
    sync_group,
    txn_offset_commit,
    update_metadata,
    write_txn_markers,
)
from samsa.handlers.apis import Api

MODULES: tuple[ModuleType, ...] = (
    produce,
    fetch,
    list_offsets,
    metadata,
    api_versions,
    create_topics,
    delete_topics,
    delete_records,
    describe_configs,
    alter_configs,
    create_partitions,
    incremental_alter_configs,
    describe_cluster,
    offset_commit,
    offset_fetch,
    find_coordinator,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
    offset_for_leader_epoch,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    describe_log_dirs,
    leader_and_isr,
    stop_replica,
    update_metadata,
    controlled_shutdown,
    alter_partition,
    init_producer_id,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    txn_offset_commit,
    describe_transactions,
    list_transactions,
    sasl_handshake,
    sasl_authenticate,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    describe_client_quotas,
    alter_client_quotas,
    describe_acls,
    create_acls,
    delete_acls,
    write_txn_markers,
    describe_producers,
)

# Kafka's names for the controller APIs kio (built for Kafka 4) no longer knows.
_NAMES = {4: "leader_and_isr", 5: "stop_replica", 6: "update_metadata", 7: "controlled_shutdown"}


def default_apis() -> list[Api]:
    from kio.index import api_key_map

    apis = []
    for module in MODULES:
        raw = api_key_map.get(module.KEY) or _NAMES[module.KEY]
        name = "".join(part.capitalize() for part in raw.split("_"))
        apis.append(
            Api(
                module.KEY,
                name,
                module.MIN_VERSION,
                module.MAX_VERSION,
                module.handle,
                (module.__doc__ or "").strip().splitlines()[0],
                getattr(module, "decode", None),
            )
        )
    return sorted(apis, key=lambda a: a.key)
