"""Where SCRAM credentials and ACLs live: in ZooKeeper as Kafka keeps them, or, standalone, in
files in the broker's data directory.

    /config/users/<user>              {"version":1,"config":{"SCRAM-SHA-512":"salt=...,
                                       stored_key=...,server_key=...,iterations=4096"}}
    /kafka-acl/<ResourceType>/<name>  {"version":1,"acls":[{"principal":"User:alice",
                                       "permissionType":"Allow","operation":"Read","host":"*"}]}
    /kafka-acl-extended/prefixed/<ResourceType>/<name>   the same, for prefixed patterns

    /kafka-acl-changes/acl_changes_<seq>           "TOPIC:name": literal ACLs of a resource
                                                   changed (Kafka's LiteralAclChangeStore)
    /kafka-acl-extended-changes/acl_changes_<seq>  {"version":1,"resourceType":"TOPIC",
                                                   "name":...,"patternType":"PREFIXED"}

Brokers read credentials from ZooKeeper at each authentication, so a change (a deleted user
among them) holds at every broker at once, and no notification is written under
/config/changes. ACL changes are announced as Kafka announces them, under the change paths
above; every broker watches them and reloads its ACLs, and notifications older than 15 minutes
are purged (Kafka's ZkNodeChangeNotificationListener does the same). Standalone:
``scram-credentials.json`` and ``acls.json`` beside meta.properties, each replaced whole
(write, fsync, rename).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from samsa.metadata.zk_data import desanitize, sanitize
from samsa.protocol.scram import ScramCredential, format_credential, parse_credential

USERS = "/config/users"
# Kafka's layout: literal ACLs under /kafka-acl, prefixed ones under /kafka-acl-extended.
ACL_ROOTS = {"LITERAL": "/kafka-acl", "PREFIXED": "/kafka-acl-extended/prefixed"}

ACL_CHANGE_PATHS = {"LITERAL": "/kafka-acl-changes", "PREFIXED": "/kafka-acl-extended-changes"}
ACL_CHANGE_PREFIX = "acl_changes_"
# Kafka's changeExpirationMs for ACL change notifications.
ACL_CHANGE_EXPIRY_MS = 15 * 60 * 1000

# (resource type name, pattern type, resource name) -> list of ACL entries in Kafka's JSON form
AclTable = dict[tuple[str, str, str], list[dict[str, Any]]]


class SecurityStore(Protocol):
    async def credentials(self, user: str) -> dict[str, ScramCredential]: ...

    async def users(self) -> list[str]: ...

    async def set_credential(self, user: str, mechanism: str, cred: ScramCredential | None) -> None:
        """Add or replace a credential; None deletes it."""

    async def acls(self) -> AclTable: ...

    async def set_acls(self, key: tuple[str, str, str], entries: list[dict[str, Any]]) -> None: ...

    async def announce_acl_change(self, key: tuple[str, str, str]) -> None:
        """Tell the other brokers that a resource's ACLs changed."""

    async def watch_acl_changes(self, on_change: Callable[[], None]) -> bool:
        """Call on_change (on the event loop) whenever another broker announces a change;
        False when this store has no other brokers to hear from."""


def acl_change_note(key: tuple[str, str, str]) -> bytes:
    """A change notification's data, in Kafka's format for the pattern type (the resource
    type by its Java enum name: "TransactionalId" is TRANSACTIONAL_ID)."""
    stored_type, pattern, name = key
    rtype = re.sub(r"(?<!^)(?=[A-Z])", "_", stored_type).upper()
    if pattern == "LITERAL":
        return f"{rtype}:{name}".encode()
    event = {"version": 1, "resourceType": rtype, "name": name, "patternType": pattern}
    return json.dumps(event, separators=(",", ":")).encode()


class ZkSecurityStore:
    def __init__(self, zk: Any) -> None:
        self.zk = zk  # samsa.metadata.zk_client.KafkaZkClient
        self._watches: list[Any] = []

    async def _user_config(self, user: str) -> dict[str, str]:
        found = await self.zk.get(f"{USERS}/{sanitize(user)}")
        if found is None or not found[0]:
            return {}
        return dict(json.loads(found[0]).get("config", {}))

    async def credentials(self, user: str) -> dict[str, ScramCredential]:
        config = await self._user_config(user)
        return {k: parse_credential(v) for k, v in config.items() if k.startswith("SCRAM-")}

    async def users(self) -> list[str]:
        return [desanitize(u) for u in await self.zk.children(USERS)]

    async def set_credential(self, user: str, mechanism: str, cred: ScramCredential | None) -> None:
        config = await self._user_config(user)
        if cred is None:
            config.pop(mechanism, None)
        else:
            config[mechanism] = format_credential(cred)
        body = json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()
        await self.zk.set_or_create(f"{USERS}/{sanitize(user)}", body)

    async def acls(self) -> AclTable:
        table: AclTable = {}
        for pattern, root in ACL_ROOTS.items():
            for rtype in await self.zk.children(root):
                for name in await self.zk.children(f"{root}/{rtype}"):
                    found = await self.zk.get(f"{root}/{rtype}/{name}")
                    if found is not None and found[0]:
                        entries = json.loads(found[0]).get("acls", [])
                        if entries:
                            table[(rtype, pattern, name)] = entries
        return table

    async def set_acls(self, key: tuple[str, str, str], entries: list[dict[str, Any]]) -> None:
        rtype, pattern, name = key
        path = f"{ACL_ROOTS[pattern]}/{rtype}/{name}"
        if entries:
            body = json.dumps({"version": 1, "acls": entries}, separators=(",", ":")).encode()
            await self.zk.set_or_create(path, body)
        else:
            await self.zk.delete(path)

    async def announce_acl_change(self, key: tuple[str, str, str]) -> None:
        root = ACL_CHANGE_PATHS["LITERAL" if key[1] == "LITERAL" else "PREFIXED"]
        await self.zk.create(
            f"{root}/{ACL_CHANGE_PREFIX}", acl_change_note(key), makepath=True, sequence=True
        )

    async def watch_acl_changes(self, on_change: Callable[[], None]) -> bool:
        for root in ACL_CHANGE_PATHS.values():
            self._watches.append(
                await self.zk.watch_notifications(root, on_change, ACL_CHANGE_EXPIRY_MS)
            )
        return True


class StandaloneSecurityStore:
    def __init__(self, data_dir: Path) -> None:
        self.users_file = data_dir / "scram-credentials.json"
        self.acls_file = data_dir / "acls.json"
        self._lock = asyncio.Lock()

    def _read(self, path: Path) -> Any:
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            return {}

    def _write(self, path: Path, value: Any) -> None:
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(value, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    async def credentials(self, user: str) -> dict[str, ScramCredential]:
        config = self._read(self.users_file).get(user, {})
        return {k: parse_credential(v) for k, v in config.items()}

    async def users(self) -> list[str]:
        return sorted(self._read(self.users_file))

    async def set_credential(self, user: str, mechanism: str, cred: ScramCredential | None) -> None:
        async with self._lock:
            users = self._read(self.users_file)
            config = users.setdefault(user, {})
            if cred is None:
                config.pop(mechanism, None)
            else:
                config[mechanism] = format_credential(cred)
            if not config:
                users.pop(user)
            self._write(self.users_file, users)

    async def acls(self) -> AclTable:
        raw = self._read(self.acls_file) or []
        return {(r["resourceType"], r["patternType"], r["name"]): r["acls"] for r in raw}

    async def set_acls(self, key: tuple[str, str, str], entries: list[dict[str, Any]]) -> None:
        async with self._lock:
            table = await self.acls()
            if entries:
                table[key] = entries
            else:
                table.pop(key, None)
            self._write(
                self.acls_file,
                [
                    {"resourceType": t, "patternType": p, "name": n, "acls": acls}
                    for (t, p, n), acls in sorted(table.items())
                ],
            )

    async def announce_acl_change(self, key: tuple[str, str, str]) -> None:
        return None

    async def watch_acl_changes(self, on_change: Callable[[], None]) -> bool:
        return False
