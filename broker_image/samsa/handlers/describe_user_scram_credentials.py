"""DescribeUserScramCredentials (50): which SCRAM mechanisms each user has, with iterations."""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.protocol.errors import ErrorCode
from samsa.protocol.scram import MECHANISM_IDS
from samsa.security.acl import AclOperation

KEY = 50
MIN_VERSION, MAX_VERSION = 0, 0
_IDS = {name: number for number, name in MECHANISM_IDS.items()}


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    assert services.sasl is not None
    store = services.sasl.store
    denied = (
        None
        if cluster_allowed(services, ctx, AclOperation.DESCRIBE)
        else ErrorCode.cluster_authorization_failed
    )
    if denied is not None:
        return {"throttle_time": 0, "error_code": denied, "error_message": None, "results": []}
    # Null or empty: every user, as Kafka answers.
    asked = [u.name for u in request.users] if request.users else None
    names = asked if asked is not None else await store.users()
    results = []
    for name in dict.fromkeys(names):
        if asked is not None and asked.count(name) > 1:
            results.append(
                {
                    "user": name,
                    "error_code": ErrorCode.duplicate_resource,
                    "error_message": "Cannot describe SCRAM credentials for the same user twice"
                    " in a single request",
                    "credential_infos": [],
                }
            )
            continue
        creds = await store.credentials(name)
        if not creds:
            if asked is not None:
                results.append(
                    {
                        "user": name,
                        "error_code": ErrorCode.resource_not_found,
                        "error_message": "Attempt to describe a user credential that does not"
                        " exist",
                        "credential_infos": [],
                    }
                )
            continue
        results.append(
            {
                "user": name,
                "error_code": ErrorCode.none,
                "error_message": None,
                "credential_infos": [
                    {"mechanism": _IDS[m], "iterations": c.iterations}
                    for m, c in sorted(creds.items())
                    if m in _IDS
                ],
            }
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "results": results,
    }
