"""Kubernetes operator for Samsa: reconciles KafkaCluster and Topic resources."""
