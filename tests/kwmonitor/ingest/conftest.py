"""Fixtures of the ingest tests: the landing directory ingest writes to."""

from __future__ import annotations

import pytest


@pytest.fixture
def landing(settings, tmp_path):
    """A scratch ``LANDING_DIR``."""
    settings.LANDING_DIR = tmp_path
    return tmp_path
