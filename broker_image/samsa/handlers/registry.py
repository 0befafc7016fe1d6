"""The handler table: every API this broker implements, with its version range."""

from __future__ import annotations

from types import ModuleType

from samsa.handlers import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_groups,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sync_group,
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
    init_producer_id,
)


def default_apis() -> list[Api]:
    from kio.index import api_key_map

    apis = []
    for module in MODULES:
        name = "".join(part.capitalize() for part in api_key_map[module.KEY].split("_"))
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
