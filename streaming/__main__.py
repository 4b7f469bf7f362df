"""``python -m streaming COMMAND ...`` — see :mod:`streaming.cli`."""

from .cli import main

raise SystemExit(main())
