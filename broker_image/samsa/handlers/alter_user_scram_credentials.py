"""AlterUserScramCredentials (51): add, replace and delete users' SCRAM credentials."""

from __future__ import annotations

from collections import Counter
from typing import Any

from samsa.handlers.authorization import cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode
from samsa.protocol.scram import (
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MIN_ITERATIONS,
    credential_from_salted,
)
from samsa.security.acl import AclOperation

KEY = 51
MIN_VERSION, MAX_VERSION = 0, 0


def _result(
    user: str, code: ErrorCode = ErrorCode.none, message: str | None = None
) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message}


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    assert services.sasl is not None
    store = services.sasl.store
    changes = [*request.deletions, *request.upsertions]
    users = list(dict.fromkeys(c.name for c in changes))
    denied = (
        None
        if cluster_allowed(services, ctx, AclOperation.ALTER)
        else ErrorCode.cluster_authorization_failed
    )
    if denied is not None:
        return {"throttle_time": 0, "results": [_result(u, denied) for u in users]}
    pairs = Counter((c.name, c.mechanism) for c in changes)
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for c in changes:
        if c.name in errors:
            continue
        if not c.name:
            errors[c.name] = (ErrorCode.unacceptable_credential, "Username must not be empty")
        elif c.mechanism not in MECHANISM_IDS:
            errors[c.name] = (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
        elif pairs[(c.name, c.mechanism)] > 1:
            errors[c.name] = (
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
        elif hasattr(c, "iterations") and not MIN_ITERATIONS <= c.iterations <= MAX_ITERATIONS:
            errors[c.name] = (
                ErrorCode.unacceptable_credential,
                f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}",
            )
    for d in request.deletions:
        if d.name not in errors:
            existing = await store.credentials(d.name)
            if MECHANISM_IDS[d.mechanism] not in existing:
                errors[d.name] = (
                    ErrorCode.resource_not_found,
                    "Attempt to delete a user credential that does not exist",
                )
    for d in request.deletions:
        if d.name not in errors:
            await store.set_credential(d.name, MECHANISM_IDS[d.mechanism], None)
    for u in request.upsertions:
        if u.name not in errors:
            mechanism = MECHANISM_IDS[u.mechanism]
            cred = credential_from_salted(
                mechanism, bytes(u.salted_password), bytes(u.salt), u.iterations
            )
            await store.set_credential(u.name, mechanism, cred)
    return {
        "throttle_time": 0,
        "results": [_result(u, *errors[u]) if u in errors else _result(u) for u in users],
    }
