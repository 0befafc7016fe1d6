"""The operator's fixtures; they live in op_support, with the helpers the tests import."""

from op_support import broker_process, helm, kubectl, kubectl_bin, operator, stand

__all__ = ["broker_process", "helm", "kubectl", "kubectl_bin", "operator", "stand"]
