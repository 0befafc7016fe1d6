"""The example pipelines; `spark-on-k8s/jobs/*.py` are their spark-submit entry points."""
