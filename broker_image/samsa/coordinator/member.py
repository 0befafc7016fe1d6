"""One member of a classic group (Kafka's MemberMetadata): identity, timeouts, protocols.

The awaiting callbacks are how parked JoinGroup and SyncGroup requests get their answers;
the coordinator sets them and the group invokes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from samsa.coordinator.results import JoinResult, MemberSummary, SyncResult
from samsa.coordinator.timers import TimerHandle

JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]
Protocols = list[tuple[str, bytes]]


class MemberMetadata:
    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        supported_protocols: Sequence[tuple[str, bytes]],
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols: Protocols = [(n, bytes(m)) for n, m in supported_protocols]
        self.assignment = assignment
        self.awaiting_join: JoinCallback | None = None
        self.awaiting_sync: SyncCallback | None = None
        # A member that has not yet completed its first join; it cannot heartbeat, so it gets
        # the long new-member join timeout instead of its session timeout.
        self.is_new = False
        self.heartbeat_timer: TimerHandle | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata bytes."""
        if len(protocols) != len(self.supported_protocols):
            return False
        return all(
            n1 == n2 and bytes(m1) == m2
            for (n1, m1), (n2, m2) in zip(protocols, self.supported_protocols, strict=True)
        )

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among those every member supports."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def summary(self, protocol: str) -> MemberSummary:
        return MemberSummary(
            self.member_id,
            self.group_instance_id,
            self.client_id,
            self.client_host,
            self.metadata(protocol),
            self.assignment,
        )

    def summary_no_metadata(self) -> MemberSummary:
        return MemberSummary(
            self.member_id, self.group_instance_id, self.client_id, self.client_host, b"", b""
        )

    def __repr__(self) -> str:
        return (
            f"MemberMetadata(member_id={self.member_id!r}, "
            f"group_instance_id={self.group_instance_id!r}, client_id={self.client_id!r}, "
            f"session_timeout_ms={self.session_timeout_ms}, "
            f"rebalance_timeout_ms={self.rebalance_timeout_ms}, "
            f"protocols={[n for n, _ in self.supported_protocols]})"
        )
