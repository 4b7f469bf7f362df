"""``python -m streaming.spark --evaluator ID --redis-url URL --checkpoint-dir DIR [--master M]``."""

from streaming.gc_policy import use_engine_thresholds
from streaming.spark.process import main

use_engine_thresholds()
raise SystemExit(main())
