"""What this broker knows of the cluster, and the metadata store behind it."""

from samsa.metadata.cache import MetadataCache
from samsa.metadata.local import LocalMetadataStore
from samsa.metadata.model import (
    BrokerInfo,
    Endpoint,
    MetadataError,
    PartitionState,
    TopicMetadata,
    TopicPartition,
)
from samsa.metadata.names import validate_topic_name
from samsa.metadata.store import MetadataListener, MetadataStore

__all__ = [
    "BrokerInfo",
    "Endpoint",
    "LocalMetadataStore",
    "MetadataCache",
    "MetadataError",
    "MetadataListener",
    "MetadataStore",
    "PartitionState",
    "TopicMetadata",
    "TopicPartition",
    "validate_topic_name",
]
