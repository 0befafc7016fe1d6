"""What this broker knows of the cluster, and the metadata store behind it."""

from samsa.metadata.cache import MetadataCache
from samsa.metadata.metadata_store import MetadataListener, MetadataStore
from samsa.metadata.model import (
    BrokerInfo,
    Endpoint,
    PartitionState,
    TopicMetadata,
    TopicPartition,
)
from samsa.metadata.names import validate_topic_name
from samsa.metadata.standalone_metadata_store import StandaloneMetadataStore

__all__ = [
    "BrokerInfo",
    "Endpoint",
    "MetadataCache",
    "MetadataListener",
    "MetadataStore",
    "PartitionState",
    "StandaloneMetadataStore",
    "TopicMetadata",
    "TopicPartition",
    "validate_topic_name",
]
