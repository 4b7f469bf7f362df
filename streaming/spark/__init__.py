"""The Spark adapter of the evaluator: ``python -m streaming.spark --evaluator ID ...``.

``job`` builds the Structured Streaming query, ``redis_source`` is the Python
streaming source over a Redis stream, ``parse`` the executor-side Arrow stage,
``process`` the evaluator process (heartbeats, status, signals).
"""

# A micro-batch starts at most this often. At 5k ops/s a batch cycle takes ~0.26 s on a 2-core
# machine, so batches run back to back under load; idle, it bounds source polling to 4 a second.
DEFAULT_TRIGGER_SECONDS = 0.25
