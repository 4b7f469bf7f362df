"""``python -m streaming.spark --evaluator ID --redis-url URL --checkpoint-dir DIR [--master M]``."""

from streaming.gc_policy import for_engine_process
from streaming.spark.process import main

for_engine_process()
raise SystemExit(main())
