"""Coverage-guided fuzzing (atheris) of the broker's pure parts: request decoding, record
batches, log recovery and the SASL exchange.  One harness per target, each runnable as
``python -m fuzz.<target> -atheris_runs=N``; ``python -m fuzz`` (``make fuzz``) runs them all.
The seed corpus lives in fuzz/corpus/<target>/ and is rebuilt by ``python -m fuzz.seeds``."""
