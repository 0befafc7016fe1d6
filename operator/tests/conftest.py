"""The operator's fixtures; they live in op_support, with the helpers the tests import."""

from op_support import helm

__all__ = ["helm"]
