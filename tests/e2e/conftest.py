"""The kind suite's fixtures and skip rule live in e2e_support."""

from e2e_support import kind_cluster, pytest_collection_modifyitems

__all__ = ["kind_cluster", "pytest_collection_modifyitems"]
