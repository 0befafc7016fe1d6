"""The handler table: every API this broker implements, with its version range."""

from __future__ import annotations

from types import ModuleType

from samsa.handlers import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_configs,
    fetch,
    incremental_alter_configs,
    list_offsets,
    metadata,
    produce,
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
