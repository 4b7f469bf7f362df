"""``python -m streaming.capture``: a stream's capture, as the supervisor runs it (:mod:`.process`)."""

from .process import main

raise SystemExit(main())
