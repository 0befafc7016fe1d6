"""Where client quota configs live: in ZooKeeper as Kafka keeps them, or, standalone, in a
file in the broker's data directory.

    /config/users/<user>                      {"version":1,"config":{"producer_byte_rate":"1024"}}
    /config/users/<user>/clients/<client-id>  the same, for a user's client id
    /config/clients/<client-id>               the same, for a client id of any user
    /config/ips/<ip>                          connection_creation_rate
    /config/changes/config_change_<seq>       {"version":2,"entity_path":"users/alice"}

Names are sanitized as Kafka's (URL-encoded), ``<default>`` stands for a default entity, and a
user's znode also holds its SCRAM credentials (security_store), which a quota change keeps.
Every change is announced under /config/changes; each broker watches that path and reloads
the quotas, and notifications older than 15 minutes are purged. Standalone:
``client-quotas.json`` beside meta.properties, replaced whole (write, fsync, rename).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from samsa.metadata.standalone_metadata_store import atomic_write
from samsa.metadata.zk_data import desanitize, sanitize
from samsa.quota.entities import (
    CLIENT_ID,
    IP,
    IP_KEYS,
    USER,
    USER_CLIENT_KEYS,
    QuotaEntity,
    entity,
)

log = logging.getLogger(__name__)

DEFAULT = "<default>"
CONFIG = "/config"
CHANGES = "/config/changes"
CHANGE_PREFIX = "config_change_"
# Kafka's changeExpirationMs for config change notifications.
CHANGE_EXPIRY_MS = 15 * 60 * 1000
_ROOTS = {USER: "users", CLIENT_ID: "clients", IP: "ips"}
_TYPES = {**USER_CLIENT_KEYS, **IP_KEYS}

Quotas = dict[QuotaEntity, dict[str, float]]


class QuotaStore(Protocol):
    async def quotas(self) -> Quotas:
        """Every entity's quotas, as the store of record holds them now."""
        ...

    async def set_quotas(self, e: QuotaEntity, values: Mapping[str, float]) -> None:
        """Replace an entity's quotas (none: the entity has no quota left)."""

    async def watch(self, on_change: Callable[[], None]) -> bool:
        """Call on_change (on the event loop) when another broker changes a quota; False when
        this store has no other brokers to hear from."""
        ...


def render(key: str, value: float) -> str:
    """A quota value as Kafka's ZooKeeper mode stored it: integral keys as integers."""
    return str(int(value)) if _TYPES.get(key, "double") != "double" else repr(float(value))


def parse_values(config: Mapping[str, Any]) -> dict[str, float]:
    """The quota keys of a config znode (a user's also holds SCRAM credentials)."""
    out: dict[str, float] = {}
    for key, raw in config.items():
        if key in _TYPES:
            try:
                out[key] = float(raw)
            except (TypeError, ValueError):
                log.warning("ignoring quota %s=%r: not a number", key, raw)
    return out


def entity_path(e: QuotaEntity) -> str:
    """users/<user>, users/<user>/clients/<client-id>, clients/<client-id> or ips/<ip>."""
    parts = dict(e)

    def name(kind: str) -> str:
        value = parts[kind]
        return DEFAULT if value is None else sanitize(value)

    if USER in parts and CLIENT_ID in parts:
        return f"users/{name(USER)}/clients/{name(CLIENT_ID)}"
    (kind,) = parts
    return f"{_ROOTS[kind]}/{name(kind)}"


def _name(znode: str) -> str | None:
    return None if znode == DEFAULT else desanitize(znode)


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class ZkQuotaStore:
    def __init__(self, zk: Any) -> None:
        self.zk = zk  # samsa.metadata.zk_client.KafkaZkClient
        self._watch: Any = None

    async def _config(self, path: str) -> dict[str, Any]:
        found = await self.zk.get(path)
        if found is None or not found[0]:
            return {}
        return dict(json.loads(found[0]).get("config", {}))

    async def quotas(self) -> Quotas:
        out: Quotas = {}

        async def read(e: QuotaEntity, path: str) -> None:
            values = parse_values(await self._config(path))
            if values:
                out[e] = values

        for user in await self.zk.children(f"{CONFIG}/users"):
            await read(entity([(USER, _name(user))]), f"{CONFIG}/users/{user}")
            for client in await self.zk.children(f"{CONFIG}/users/{user}/clients"):
                e = entity([(USER, _name(user)), (CLIENT_ID, _name(client))])
                await read(e, f"{CONFIG}/users/{user}/clients/{client}")
        for kind in (CLIENT_ID, IP):
            root = f"{CONFIG}/{_ROOTS[kind]}"
            for child in await self.zk.children(root):
                await read(entity([(kind, _name(child))]), f"{root}/{child}")
        return out

    async def set_quotas(self, e: QuotaEntity, values: Mapping[str, float]) -> None:
        path = f"{CONFIG}/{entity_path(e)}"
        config = {k: v for k, v in (await self._config(path)).items() if k not in _TYPES}
        config.update({k: render(k, v) for k, v in sorted(values.items())})
        await self.zk.set_or_create(path, _dump({"version": 1, "config": config}))
        note = {"version": 2, "entity_path": entity_path(e)}
        await self.zk.create(
            f"{CHANGES}/{CHANGE_PREFIX}", _dump(note), makepath=True, sequence=True
        )

    async def watch(self, on_change: Callable[[], None]) -> bool:
        self._watch = await self.zk.watch_notifications(CHANGES, on_change, CHANGE_EXPIRY_MS)
        return True


class StandaloneQuotaStore:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "client-quotas.json"
        self._lock = asyncio.Lock()

    async def quotas(self) -> Quotas:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return {
            entity(item["entity"].items()): parse_values(item["config"])
            for item in raw
            if parse_values(item["config"])
        }

    async def set_quotas(self, e: QuotaEntity, values: Mapping[str, float]) -> None:
        async with self._lock:
            table = await self.quotas()
            if values:
                table[e] = dict(values)
            else:
                table.pop(e, None)
            rows = [
                {"entity": dict(k), "config": {n: render(n, v) for n, v in sorted(v.items())}}
                for k, v in sorted(table.items(), key=lambda kv: entity_path(kv[0]))
            ]
            atomic_write(self.path, json.dumps(rows, indent=1, sort_keys=True))

    async def watch(self, on_change: Callable[[], None]) -> bool:
        return False


class QuotaFollower:
    """Keeps a broker's quota managers as the store holds the configs: loaded at start, and
    again after each change notification; one reload at a time, and a notification that comes
    during one asks for another, so the last change is never missed."""

    def __init__(self, store: QuotaStore, apply: Callable[[Quotas], None]) -> None:
        self.store = store
        self.apply = apply
        self._again = False
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.apply(await self.store.quotas())
        await self.store.watch(self.changed)

    def changed(self) -> None:
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._reload())

    async def _reload(self) -> None:
        while True:
            self._again = False
            try:
                self.apply(await self.store.quotas())
            except Exception:
                log.exception("cannot reload the client quotas")
            if not self._again:
                return
