"""JoinGroup (Kafka's handleJoinGroup): a new member, a KIP-394 pending member coming back
with its id, or a known member rejoining; each join may start a rebalance or complete the one
in progress. A static member that rejoins with a new member id is ``static_membership``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from samsa.coordinator.group import GroupMetadata, GroupState
from samsa.coordinator.member import JoinCallback, MemberMetadata
from samsa.coordinator.rebalance import Rebalancer, join_result_for
from samsa.coordinator.results import UNKNOWN_MEMBER_ID, JoinRequest, JoinResult
from samsa.coordinator.static_membership import update_static_member_and_rebalance
from samsa.protocol.errors import ErrorCode

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

_S = GroupState


def handle_join(rebalancer: Rebalancer, req: JoinRequest, respond: JoinCallback) -> None:
    """Kafka's handleJoinGroup, after the group's coordinator status was checked."""
    if not (
        rebalancer.config.group_min_session_timeout_ms
        <= req.session_timeout_ms
        <= rebalancer.config.group_max_session_timeout_ms
    ):
        respond(JoinResult.failed(req.member_id, ErrorCode.invalid_session_timeout))
        return
    is_unknown_member = req.member_id == UNKNOWN_MEMBER_ID
    group = rebalancer.manager.get_or_maybe_create_group(req.group_id, is_unknown_member)
    if group is None:
        respond(JoinResult.failed(req.member_id, ErrorCode.unknown_member_id))
        return
    if not _accept_joining_member(rebalancer, group, req.member_id) or not _storable_with(
        rebalancer, group, req
    ):
        dropped = group.remove(req.member_id)
        if dropped is not None:
            rebalancer.heartbeats.cancel_heartbeat(dropped)
        respond(JoinResult.failed(UNKNOWN_MEMBER_ID, ErrorCode.group_max_size_reached))
    elif is_unknown_member:
        _new_member_join(rebalancer, group, req, respond)
    else:
        _current_member_join(rebalancer, group, req, respond)
    if group.is_(_S.PREPARING_REBALANCE):
        rebalancer.check_join(group)


def _accept_joining_member(rebalancer: Rebalancer, group: GroupMetadata, member_id: str) -> bool:
    """group.max.size. During a rebalance count only those who rejoined, so that if the
    limit was lowered the last to rejoin are the ones turned away."""
    max_size = rebalancer.config.group_max_size
    if group.state in (_S.EMPTY, _S.DEAD):
        return True
    if group.is_(_S.PREPARING_REBALANCE):
        rejoined = group.has(member_id) and group.get(member_id).is_awaiting_join
        return rejoined or group.num_awaiting < max_size
    return group.has(member_id) or group.size < max_size


def _storable_with(rebalancer: Rebalancer, group: GroupMetadata, req: JoinRequest) -> bool:
    """Whether the group's metadata record could still be stored with this member in it.

    Not in Kafka, which lets such a group form and then fails every SyncGroup with
    UNKNOWN_SERVER_ERROR (the record is over message.max.bytes), so that its members
    rejoin and fail forever.  Here the member that cannot fit is turned away at once,
    with GROUP_MAX_SIZE_REACHED, and the others go on.  The size counted is a lower bound
    of the record's (each member's smallest protocol metadata and its ids, no
    assignments), so no group that Kafka could store is refused.
    """

    def least(ids: Sequence[str | None], protocols: Sequence[tuple[str, bytes]]) -> int:
        return sum(len(i or "") for i in ids) + min((len(m) for _, m in protocols), default=0)

    total = least(
        (req.member_id, req.group_instance_id, req.client_id, req.client_host), req.protocols
    )
    for m in group.all_member_metadata():
        replaced = m.member_id == req.member_id or (
            req.group_instance_id is not None and m.group_instance_id == req.group_instance_id
        )
        if not replaced:
            ids = (m.member_id, m.group_instance_id, m.client_id, m.client_host)
            total += least(ids, m.supported_protocols)
    return total <= rebalancer.config.max_message_bytes


def _new_member_join(
    rebalancer: Rebalancer, group: GroupMetadata, req: JoinRequest, respond: JoinCallback
) -> None:
    if group.is_(_S.DEAD):
        # The group was just removed (unloaded or deleted): let the member find the
        # coordinator again and rejoin.
        respond(JoinResult.failed(UNKNOWN_MEMBER_ID, ErrorCode.coordinator_not_available))
        return
    if not group.supports_protocols(req.protocol_type, req.protocol_names):
        respond(JoinResult.failed(UNKNOWN_MEMBER_ID, ErrorCode.inconsistent_group_protocol))
        return
    new_member_id = group.generate_member_id(req.client_id, req.group_instance_id)
    if req.group_instance_id is not None:
        old_member_id = group.current_static_member_id(req.group_instance_id)
        if old_member_id is not None:
            update_static_member_and_rebalance(
                rebalancer, group, req, old_member_id, new_member_id, respond
            )
        else:
            _add_member_and_rebalance(rebalancer, group, req, new_member_id, respond)
    elif req.require_known_member_id:
        # KIP-394: hand out the id and make the client come back with it, so a client
        # that times out and retries does not leave a ghost member behind.
        group.add_pending_member(new_member_id)
        rebalancer.heartbeats.add_pending_member_expiration(
            group, new_member_id, req.session_timeout_ms
        )
        respond(JoinResult.failed(new_member_id, ErrorCode.member_id_required))
    else:
        _add_member_and_rebalance(rebalancer, group, req, new_member_id, respond)


def _current_member_join(
    rebalancer: Rebalancer, group: GroupMetadata, req: JoinRequest, respond: JoinCallback
) -> None:
    member_id = req.member_id
    if group.is_(_S.DEAD):
        respond(JoinResult.failed(member_id, ErrorCode.coordinator_not_available))
        return
    if not group.supports_protocols(req.protocol_type, req.protocol_names):
        respond(JoinResult.failed(member_id, ErrorCode.inconsistent_group_protocol))
        return
    if group.is_pending_member(member_id):
        if req.group_instance_id is not None:
            # Pending ids only go to dynamic members; Kafka fails this with an internal
            # error.
            respond(JoinResult.failed(member_id, ErrorCode.unknown_server_error))
            return
        _add_member_and_rebalance(rebalancer, group, req, member_id, respond)
        return
    error = group.validate_current_member(member_id, req.group_instance_id)
    if error is not None:
        respond(JoinResult.failed(member_id, error))
        return
    member = group.get(member_id)
    if group.is_(_S.PREPARING_REBALANCE):
        _update_member_and_rebalance(rebalancer, group, member, req, respond)
    elif group.is_(_S.COMPLETING_REBALANCE):
        if member.matches(req.protocols):
            # Probably a retry after a lost JoinGroup answer: give this generation again.
            respond(join_result_for(group, member_id))
        else:
            _update_member_and_rebalance(rebalancer, group, member, req, respond)
    elif group.is_(_S.STABLE):
        if group.is_leader(member_id) or not member.matches(req.protocols):
            # A leader's JoinGroup forces a rebalance: that is how it reacts to changes
            # (new partitions, say) that do not show in its own metadata.
            _update_member_and_rebalance(rebalancer, group, member, req, respond)
        else:
            respond(join_result_for(group, member_id, with_members=False))
    else:
        respond(JoinResult.failed(member_id, ErrorCode.unknown_member_id))


def _add_member_and_rebalance(
    rebalancer: Rebalancer,
    group: GroupMetadata,
    req: JoinRequest,
    member_id: str,
    respond: JoinCallback,
) -> None:
    member = MemberMetadata(
        member_id,
        req.group_instance_id,
        req.client_id,
        req.client_host,
        req.rebalance_timeout_ms,
        req.session_timeout_ms,
        req.protocol_type,
        req.protocols,
    )
    member.is_new = True
    if group.is_(_S.PREPARING_REBALANCE) and group.generation_id == 0:
        group.new_member_added = True
    pending_timer = group.pending_member_timers.pop(member_id, None)
    if pending_timer is not None:
        pending_timer.cancel()
    group.add(member, respond)
    # A new member cannot heartbeat before its first JoinGroup answer, and a client that
    # gave up and retried would leave it behind: expire it after a long timeout.
    rebalancer.heartbeats.schedule_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
    rebalancer.maybe_prepare_rebalance(
        group, f"adding member {member_id} (instance {req.group_instance_id}): {req.reason}"
    )


def _update_member_and_rebalance(
    rebalancer: Rebalancer,
    group: GroupMetadata,
    member: MemberMetadata,
    req: JoinRequest,
    respond: JoinCallback,
) -> None:
    group.update_member(
        member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond
    )
    rebalancer.maybe_prepare_rebalance(group, f"member {member.member_id} rejoined: {req.reason}")
