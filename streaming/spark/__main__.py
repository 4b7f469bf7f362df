"""``python -m streaming.spark --evaluator ID --redis-url URL --checkpoint-dir DIR [--master M]``."""

from streaming.tuning import for_engine_process

for_engine_process()  # before the evaluator's imports: numpy reads its thread count when imported

from streaming.spark.process import main  # noqa: E402

raise SystemExit(main())
