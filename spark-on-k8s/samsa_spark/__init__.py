"""PySpark data source and sink for Samsa topics."""
