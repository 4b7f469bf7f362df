"""``python -m streaming COMMAND ...`` — see :mod:`streaming.cli`."""

from .cli import main
from .gc_policy import for_engine_process

for_engine_process()
raise SystemExit(main())
