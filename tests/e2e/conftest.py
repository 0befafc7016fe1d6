"""The kind suite's fixtures and skip rule live in e2e_support, the real nodes' fixture in
realnodes_support."""

from e2e_support import kind_cluster, pytest_collection_modifyitems
from realnodes_support import real_cluster

__all__ = ["kind_cluster", "pytest_collection_modifyitems", "real_cluster"]
