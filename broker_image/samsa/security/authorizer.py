"""The Authorizer: Kafka's ``authorizer.class.name`` settings, a cache of the stored ACLs, and
the calls handlers make. The decision itself is samsa.security.acl's pure ``authorize``.

ACLs written through this broker reach its cache at once, and the change is announced as
Kafka announces it (/kafka-acl-changes, /kafka-acl-extended-changes); a cluster's other brokers
watch those and reload. A slow periodic reload is kept as a safety net only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

from samsa.config import ConfigError, KafkaConfig
from samsa.security.acl import (
    AclBinding,
    AclFilter,
    AclOperation,
    ResourceType,
    authorize,
    authorize_by_resource_type,
    authorized_operations,
    bindings_from,
)
from samsa.security.security_store import SecurityStore
from samsa.security.session import ConnectionSession

log = logging.getLogger(__name__)

AUTHORIZER_CLASSES = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
)
_REFRESH_S = 60.0


def super_users(text: str | None) -> frozenset[str]:
    """``super.users=User:admin;User:CN=broker,O=Samsa`` (semicolons, as Kafka's)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


class Authorizer:
    def __init__(self, config: KafkaConfig, store: SecurityStore) -> None:
        self.store = store
        self.super_users = super_users(config["super.users"])
        self.allow_if_no_acl = bool(config["allow.everyone.if.no.acl.found"])
        self.bindings: list[AclBinding] = []
        self._refresher: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        # Announced changes: reload once per burst, and again if more arrived meanwhile.
        self._changed = asyncio.Event()
        self._follower: asyncio.Task[None] | None = None

    @staticmethod
    def from_config(config: KafkaConfig, store: SecurityStore) -> Authorizer | None:
        name = config["authorizer.class.name"]
        if not name:
            return None
        if name not in AUTHORIZER_CLASSES:
            raise ConfigError(
                "authorizer.class.name", f"{name} is not one of {', '.join(AUTHORIZER_CLASSES)}"
            )
        return Authorizer(config, store)

    async def start(self, refresh: bool) -> None:
        await self.reload()
        if refresh:
            if await self.store.watch_acl_changes(self._changed.set):
                self._follower = asyncio.create_task(self._follow_changes())
            self._refresher = asyncio.create_task(self._refresh_loop())

    async def stop(self) -> None:
        for task in (self._refresher, self._follower):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _follow_changes(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                await self.reload()
            except Exception as exc:  # ZooKeeper away: the next change or refresh retries
                log.warning("could not reload ACLs after a change: %s", exc)

    async def reload(self) -> None:
        table = await self.store.acls()
        self.bindings = [b for key, entries in table.items() for b in bindings_from(key, entries)]

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(_REFRESH_S)
            try:
                await self.reload()
            except Exception as exc:  # ZooKeeper away: keep the last ACLs we read
                log.warning("could not reload ACLs: %s", exc)

    def allowed(
        self,
        session: ConnectionSession,
        host: str,
        op: AclOperation,
        rtype: ResourceType,
        name: str,
    ) -> bool:
        return authorize(
            self.bindings,
            str(session.principal),
            host,
            op,
            rtype,
            name,
            super_users=self.super_users,
            allow_if_no_acl=self.allow_if_no_acl,
        )

    def allowed_on_any(
        self, session: ConnectionSession, host: str, op: AclOperation, rtype: ResourceType
    ) -> bool:
        return authorize_by_resource_type(
            self.bindings,
            str(session.principal),
            host,
            op,
            rtype,
            super_users=self.super_users,
            allow_if_no_acl=self.allow_if_no_acl,
        )

    def operations(
        self, session: ConnectionSession, host: str, rtype: ResourceType, name: str
    ) -> int:
        return authorized_operations(
            self.bindings,
            str(session.principal),
            host,
            rtype,
            name,
            super_users=self.super_users,
            allow_if_no_acl=self.allow_if_no_acl,
        )

    def describe(self, flt: AclFilter) -> list[AclBinding]:
        return [b for b in self.bindings if flt.matches(b)]

    async def create(self, bindings: Iterable[AclBinding]) -> None:
        async with self._lock:
            await self.reload()
            table = await self.store.acls()
            for b in bindings:
                entries = table.setdefault(b.key, [])
                if b.entry() not in entries:
                    entries.append(b.entry())
                    await self.store.set_acls(b.key, entries)
                    await self.store.announce_acl_change(b.key)
            await self.reload()

    async def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        async with self._lock:
            await self.reload()
            matched = [[b for b in self.bindings if f.matches(b)] for f in filters]
            gone = {b for m in matched for b in m}
            table = await self.store.acls()
            for key in {b.key for b in gone}:
                keep = [
                    e
                    for e in table.get(key, [])
                    if not any(b.key == key and b.entry() == e for b in gone)
                ]
                await self.store.set_acls(key, keep)
                await self.store.announce_acl_change(key)
            await self.reload()
            return matched
