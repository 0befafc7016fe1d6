"""Quota entities and quota configs, as Kafka has them: which entities a quota may be set on,
which keys and values are valid (ClientQuotaControlManager), how DescribeClientQuotas filters
match (ClientQuotasImage.describe), and which of the eight user and client-id combinations
governs a client (ClientQuotaManager's DefaultQuotaCallback), most specific first:

    /config/users/<user>/clients/<client-id>
    /config/users/<user>/clients/<default>
    /config/users/<user>
    /config/users/<default>/clients/<client-id>
    /config/users/<default>/clients/<default>
    /config/users/<default>
    /config/clients/<client-id>
    /config/clients/<default>

An entity is a mapping of entity type (``user``, ``client-id``, ``ip``) to a name, None
standing for that type's default, as on the wire. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Kafka's QuotaConfig: the keys a user or client-id entity takes, and an ip entity's, by type.
USER_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: "long",
    CONSUMER_BYTE_RATE: "long",
    REQUEST_PERCENTAGE: "double",
    CONTROLLER_MUTATION_RATE: "double",
}
IP_KEYS = {CONNECTION_CREATION_RATE: "int"}
_MAXIMA = {"int": 2**31 - 1, "long": 2**63 - 1}

# DescribeClientQuotas match types.
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# An entity as a sorted tuple of (entity type, name or None for the default): hashable, and
# the same however the request ordered its parts.
QuotaEntity = tuple[tuple[str, str | None], ...]


def entity(parts: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The entity of these (type, name) parts; a type named twice keeps its last name, as
    Kafka's request reader builds a map."""
    return tuple(sorted(dict(parts).items()))


class QuotaError(Exception):
    """A request Kafka refuses with INVALID_REQUEST (or UNSUPPORTED_VERSION), and its message."""

    def __init__(self, message: str, unsupported: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.unsupported = unsupported


def _describe(e: QuotaEntity) -> str:
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in e) + "})"


def valid_keys(e: QuotaEntity) -> dict[str, str]:
    """The keys an entity takes, by type; QuotaError for an entity Kafka refuses."""
    if not e:
        raise QuotaError("Invalid empty client quota entity")
    types = dict(e)
    for kind, name in e:
        if kind not in ENTITY_TYPES:
            raise QuotaError(f"Unhandled client quota entity type: {kind}")
        if name is not None and name == "":
            raise QuotaError(f"Empty {kind} not supported")
    if IP in types:
        if USER in types or CLIENT_ID in types:
            # Kafka's message, its missing space included.
            raise QuotaError(
                "Invalid quota entity combination, IP entity shouldnot be combined with User"
                " or ClientId"
            )
        return IP_KEYS
    return USER_CLIENT_KEYS


def check_value(keys: Mapping[str, str], key: str, value: float) -> None:
    """QuotaError unless ``value`` is valid for ``key`` (Kafka's validateQuotaKeyValue)."""
    kind = keys.get(key)
    if kind is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if not value > 0.0:
        raise QuotaError(f"Quota {key} must be greater than 0")
    if kind == "double":
        return
    if value > _MAXIMA[kind]:
        article = "an" if kind == "int" else "a"
        raise QuotaError(f"Proposed value for {key} is too large for {article} {kind.upper()}.")
    if abs(value % 1.0) > 1e-6:
        raise QuotaError(f"{key} cannot be a fractional value.")


def altered(
    current: Mapping[str, float], e: QuotaEntity, ops: Iterable[tuple[str, float, bool]]
) -> dict[str, float]:
    """An entity's quotas after (key, value, remove) ops, or QuotaError naming the first
    refusal; nothing is applied when one op is refused."""
    changes: dict[str, float | None] = {}
    for key, value, remove in ops:
        if key in changes:
            raise QuotaError(
                f"Duplicate quota key {key} not updating quota for this entity {_describe(e)}"
            )
        changes[key] = None if remove else value
    keys = valid_keys(e)
    out = dict(current)
    for key, change in changes.items():
        if change is None:
            out.pop(key, None)
        else:
            check_value(keys, key, change)
            out[key] = float(change)
    return out


@dataclass(frozen=True)
class Filter:
    """A DescribeClientQuotas filter: exact names (None: the default) and types that must be
    present, strict or not."""

    exact: dict[str, str | None]
    specified: frozenset[str]
    strict: bool

    def matches(self, e: QuotaEntity) -> bool:
        types = dict(e)
        if self.strict and len(types) != len(self.exact) + len(self.specified):
            return False
        for kind, name in self.exact.items():
            if kind not in types or types[kind] != name:
                return False
        return all(kind in types for kind in self.specified)


def describe_filter(components: Iterable[tuple[str, int, str | None]], strict: bool) -> Filter:
    """A filter from (entity type, match type, match) components; QuotaError as Kafka refuses
    a filter (ClientQuotasImage.describe)."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for kind, match_type, match in components:
        if not kind:
            raise QuotaError("Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise QuotaError(f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in ENTITY_TYPES:
            raise QuotaError(f"Unsupported entity type {kind}", unsupported=True)
        if match_type == MATCH_EXACT:
            if match is None:
                raise QuotaError(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null."
                )
            exact[kind] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise QuotaError(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                )
            exact[kind] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise QuotaError(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                )
            specified.add(kind)
        else:
            raise QuotaError(f"Unknown match type {match_type}")
    named = exact.keys() | specified
    if IP in named and (USER in named or CLIENT_ID in named):
        raise QuotaError(
            "Invalid entity filter component combination. IP filter component should not be"
            " used with user or clientId filter component."
        )
    return Filter(exact, frozenset(specified), strict)


# ------------------------------------------------------------------ precedence

# Metric tags (user, client-id): which clients share one quota. "" is an absent tag.
Tags = tuple[str, str]

_DEFAULT_USER: QuotaEntity = ((USER, None),)
_DEFAULT_CLIENT: QuotaEntity = ((CLIENT_ID, None),)
_DEFAULT_BOTH: QuotaEntity = ((CLIENT_ID, None), (USER, None))


def _user(user: str) -> QuotaEntity:
    return ((USER, user),)


def _client(client_id: str) -> QuotaEntity:
    return ((CLIENT_ID, client_id),)


def _both(user: str | None, client_id: str | None) -> QuotaEntity:
    return ((CLIENT_ID, client_id), (USER, user))


def metric_tags(limits: Mapping[QuotaEntity, float], user: str, client_id: str) -> Tags:
    """The tags of the quota that governs (user, client id), Kafka's quotaMetricTags: a quota
    at user level is shared by all that user's clients (client-id tag empty), one at
    client-id level by that client id of every user (user tag empty)."""
    if _both(user, client_id) in limits or _both(user, None) in limits:
        return user, client_id
    if _user(user) in limits:
        return user, ""
    if _both(None, client_id) in limits or _DEFAULT_BOTH in limits:
        return user, client_id
    if _DEFAULT_USER in limits:
        return user, ""
    return "", client_id


def quota_limit(limits: Mapping[QuotaEntity, float], tags: Tags) -> float | None:
    """The bound of the quota with these tags (Kafka's quotaLimit), None: unlimited."""
    user, client_id = tags
    if user and client_id:
        for e in (
            _both(user, client_id),
            _both(user, None),
            _both(None, client_id),
            _DEFAULT_BOTH,
        ):
            if e in limits:
                return limits[e]
    elif user:
        for e in (_user(user), _DEFAULT_USER):
            if e in limits:
                return limits[e]
    elif client_id:
        for e in (_client(client_id), _DEFAULT_CLIENT):
            if e in limits:
                return limits[e]
    return None


def limits_of(
    configs: Mapping[QuotaEntity, Mapping[str, float]], key: str
) -> dict[QuotaEntity, float]:
    """One quota key's bounds by entity (ip entities left out: they take no client quota)."""
    return {
        e: values[key]
        for e, values in configs.items()
        if key in values and all(kind != IP for kind, _ in e)
    }
