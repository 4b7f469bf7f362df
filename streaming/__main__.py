"""``python -m streaming COMMAND ...`` — see :mod:`streaming.cli`."""

from .cli import main
from .gc_policy import use_engine_thresholds

use_engine_thresholds()
raise SystemExit(main())
