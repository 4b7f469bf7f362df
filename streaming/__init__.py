"""kwmonitor's engine: continuous keyword search over relational streams.

Pure Python; no Django import anywhere below this package. Spark lives in
``streaming.spark`` and only drives the engine.
"""
