"""The controller-to-broker APIs of ZooKeeper-mode Kafka, which kio (built for Kafka 4) lacks.

LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6) and ControlledShutdown (7), written as
kio-style dataclasses so that kio's generic reader and writer serve them like every other
API.  One flexible version of each, laid out as Apache Kafka 3.x lays out that version
(LeaderAndIsr v6, StopReplica v3, UpdateMetadata v7, ControlledShutdown v3); only Samsa
brokers send them to each other, so no older version is needed.

Also WriteTxnMarkers (27) v0, the non-flexible version Kafka 3.9 still accepts (Kafka 4
removed it, and kio with it); v1 is kio's.
"""

import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
CONTROLLED_SHUTDOWN = 7
WRITE_TXN_MARKERS = 27

LEADER_AND_ISR_VERSION = 6
STOP_REPLICA_VERSION = 3
UPDATE_METADATA_VERSION = 7
CONTROLLED_SHUTDOWN_VERSION = 3

_I32 = {"kafka_type": "int32"}
_I64 = {"kafka_type": "int64"}
_I16 = {"kafka_type": "int16"}
_I8 = {"kafka_type": "int8"}
_STR = {"kafka_type": "string"}
_BOOL = {"kafka_type": "bool"}
_UUID = {"kafka_type": "uuid"}
_ERR = {"kafka_type": "error_code"}


# ---------------------------------------------------------------- LeaderAndIsr (4) v6


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrPartitionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata=_I32)
    controller_epoch: i32 = field(metadata=_I32)
    leader: i32 = field(metadata=_I32)
    leader_epoch: i32 = field(metadata=_I32)
    isr: tuple[i32, ...] = field(metadata=_I32)
    partition_epoch: i32 = field(metadata=_I32)
    replicas: tuple[i32, ...] = field(metadata=_I32)
    adding_replicas: tuple[i32, ...] = field(metadata=_I32, default=())
    removing_replicas: tuple[i32, ...] = field(metadata=_I32, default=())
    is_new: bool = field(metadata=_BOOL, default=False)
    leader_recovery_state: i8 = field(metadata=_I8, default=i8(0))


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrTopicState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_name: str = field(metadata=_STR)
    topic_id: uuid.UUID = field(metadata=_UUID)
    partition_states: tuple[LeaderAndIsrPartitionState, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrLiveLeader:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    broker_id: i32 = field(metadata=_I32)
    host_name: str = field(metadata=_STR)
    port: i32 = field(metadata=_I32)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: i32 = field(metadata=_I32)
    controller_epoch: i32 = field(metadata=_I32)
    broker_epoch: i64 = field(metadata=_I64, default=i64(-1))
    # 0: incremental, 1: full (every partition this broker hosts).
    type: i8 = field(metadata=_I8, default=i8(0))
    topic_states: tuple[LeaderAndIsrTopicState, ...]
    live_leaders: tuple[LeaderAndIsrLiveLeader, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrPartitionError:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata=_I32)
    error_code: ErrorCode = field(metadata=_ERR)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrTopicError:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_id: uuid.UUID = field(metadata=_UUID)
    partition_errors: tuple[LeaderAndIsrPartitionError, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(LEADER_AND_ISR_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata=_ERR)
    topics: tuple[LeaderAndIsrTopicError, ...]


# ---------------------------------------------------------------- StopReplica (5) v3


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(STOP_REPLICA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STOP_REPLICA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata=_I32)
    leader_epoch: i32 = field(metadata=_I32, default=i32(-1))
    delete_partition: bool = field(metadata=_BOOL, default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaTopicState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(STOP_REPLICA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STOP_REPLICA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_name: str = field(metadata=_STR)
    partition_states: tuple[StopReplicaPartitionState, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(STOP_REPLICA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STOP_REPLICA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: i32 = field(metadata=_I32)
    controller_epoch: i32 = field(metadata=_I32)
    broker_epoch: i64 = field(metadata=_I64, default=i64(-1))
    topic_states: tuple[StopReplicaTopicState, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionError:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(STOP_REPLICA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STOP_REPLICA)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: str = field(metadata=_STR)
    partition_index: i32 = field(metadata=_I32)
    error_code: ErrorCode = field(metadata=_ERR)


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(STOP_REPLICA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STOP_REPLICA)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata=_ERR)
    partition_errors: tuple[StopReplicaPartitionError, ...]


# ---------------------------------------------------------------- UpdateMetadata (6) v7


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataPartitionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(UPDATE_METADATA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(UPDATE_METADATA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata=_I32)
    controller_epoch: i32 = field(metadata=_I32)
    leader: i32 = field(metadata=_I32)
    leader_epoch: i32 = field(metadata=_I32)
    isr: tuple[i32, ...] = field(metadata=_I32)
    partition_epoch: i32 = field(metadata=_I32)
    replicas: tuple[i32, ...] = field(metadata=_I32)
    offline_replicas: tuple[i32, ...] = field(metadata=_I32, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataTopicState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(UPDATE_METADATA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(UPDATE_METADATA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_name: str = field(metadata=_STR)
    topic_id: uuid.UUID = field(metadata=_UUID)
    partition_states: tuple[UpdateMetadataPartitionState, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataEndpoint:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(UPDATE_METADATA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(UPDATE_METADATA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    port: i32 = field(metadata=_I32)
    host: str = field(metadata=_STR)
    listener: str = field(metadata=_STR)
    security_protocol: i16 = field(metadata=_I16)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataBroker:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(UPDATE_METADATA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(UPDATE_METADATA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    id: i32 = field(metadata=_I32)
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = field(metadata=_STR)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(UPDATE_METADATA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(UPDATE_METADATA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: i32 = field(metadata=_I32)
    controller_epoch: i32 = field(metadata=_I32)
    broker_epoch: i64 = field(metadata=_I64, default=i64(-1))
    topic_states: tuple[UpdateMetadataTopicState, ...]
    live_brokers: tuple[UpdateMetadataBroker, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(UPDATE_METADATA_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(UPDATE_METADATA)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata=_ERR)


# ---------------------------------------------------------------- ControlledShutdown (7) v3


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(CONTROLLED_SHUTDOWN_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONTROLLED_SHUTDOWN)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    broker_id: i32 = field(metadata=_I32)
    broker_epoch: i64 = field(metadata=_I64, default=i64(-1))


@dataclass(frozen=True, slots=True, kw_only=True)
class RemainingPartition:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(CONTROLLED_SHUTDOWN_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONTROLLED_SHUTDOWN)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: str = field(metadata=_STR)
    partition_index: i32 = field(metadata=_I32)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(CONTROLLED_SHUTDOWN_VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONTROLLED_SHUTDOWN)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata=_ERR)
    remaining_partitions: tuple[RemainingPartition, ...]


# ---------------------------------------------------------------- WriteTxnMarkers (27) v0


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    name: str = field(metadata=_STR)
    partition_indexes: tuple[i32, ...] = field(metadata=_I32, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    producer_id: i64 = field(metadata=_I64)
    producer_epoch: i16 = field(metadata=_I16)
    transaction_result: bool = field(metadata=_BOOL)
    topics: tuple[WritableTxnMarkerTopicV0, ...]
    coordinator_epoch: i32 = field(metadata=_I32)


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteTxnMarkersRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    markers: tuple[WritableTxnMarkerV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerPartitionResultV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    partition_index: i32 = field(metadata=_I32)
    error_code: ErrorCode = field(metadata=_ERR)


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerTopicResultV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    name: str = field(metadata=_STR)
    partitions: tuple[WritableTxnMarkerPartitionResultV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerResultV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    producer_id: i64 = field(metadata=_I64)
    topics: tuple[WritableTxnMarkerTopicResultV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteTxnMarkersResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(WRITE_TXN_MARKERS)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    markers: tuple[WritableTxnMarkerResultV0, ...]


REQUESTS: dict[tuple[int, int], Any] = {
    (LEADER_AND_ISR, LEADER_AND_ISR_VERSION): LeaderAndIsrRequest,
    (STOP_REPLICA, STOP_REPLICA_VERSION): StopReplicaRequest,
    (UPDATE_METADATA, UPDATE_METADATA_VERSION): UpdateMetadataRequest,
    (CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_VERSION): ControlledShutdownRequest,
    (WRITE_TXN_MARKERS, 0): WriteTxnMarkersRequestV0,
}
RESPONSES: dict[tuple[int, int], Any] = {
    (LEADER_AND_ISR, LEADER_AND_ISR_VERSION): LeaderAndIsrResponse,
    (STOP_REPLICA, STOP_REPLICA_VERSION): StopReplicaResponse,
    (UPDATE_METADATA, UPDATE_METADATA_VERSION): UpdateMetadataResponse,
    (CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_VERSION): ControlledShutdownResponse,
    (WRITE_TXN_MARKERS, 0): WriteTxnMarkersResponseV0,
}
