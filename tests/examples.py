"""The repository's worked examples (docs/examples), located from this file so a clone runs anywhere."""

from pathlib import Path

__all__ = ["EXAMPLES", "ECOMMERCE", "PHOTONS"]

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples" / "ecommerce"
ECOMMERCE = str(EXAMPLES / "schema.json")
PHOTONS = Path(__file__).resolve().parents[1] / "docs" / "examples" / "photons"
