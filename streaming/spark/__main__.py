"""``python -m streaming.spark --evaluator ID --redis-url URL --checkpoint-dir DIR [--master M]``."""

from streaming.spark.process import main

raise SystemExit(main())
