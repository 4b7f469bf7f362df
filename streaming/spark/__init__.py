"""The Spark adapter of the evaluator: ``python -m streaming.spark --evaluator ID ...``.

``job`` builds the Structured Streaming query, ``redis_source`` is the Python
streaming source over a Redis stream, ``parse`` the executor-side Arrow stage,
``process`` the evaluator process (heartbeats, status, signals).
"""
