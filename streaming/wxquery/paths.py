"""Absolute element paths as APTs write them: ``/photons/photon/en``, or stream-qualified in APFs.

A path string starts at the stream's root element. In an APF (several
input streams) a path is qualified by its stream, in the paper's notation:
``stream("photon1")/photons/photon/en``. Aggregate values are written as the
function applied to the aggregated path, ``avg(/photons/photon/en)`` (with the
aggregate's pre-selection, if any, in brackets after the path).
"""

from __future__ import annotations

import re

__all__ = ["absolute", "split", "qualify", "unqualify", "stream_of", "is_prefix", "relative_to", "depth"]

_QUALIFIED = re.compile(r'^stream\("([^"]*)"\)(/.*)$')


def absolute(steps: tuple[str, ...]) -> str:
    """``("photons", "photon")`` -> ``/photons/photon``."""
    return "/" + "/".join(steps)


def split(path: str) -> tuple[str, ...]:
    """The steps of an (unqualified or qualified) absolute path."""
    return tuple(s for s in unqualify(path).split("/") if s)


def qualify(stream: str, path: str) -> str:
    return f'stream("{stream}"){path}'


def unqualify(path: str) -> str:
    found = _QUALIFIED.match(path)
    return found.group(2) if found else path


def stream_of(path: str) -> str | None:
    found = _QUALIFIED.match(path)
    return found.group(1) if found else None


def is_prefix(prefix: str, path: str) -> bool:
    """Whether ``prefix`` is ``path`` or one of its ancestors."""
    return path == prefix or path.startswith(prefix + "/")


def relative_to(base: str, path: str) -> tuple[str, ...]:
    """The steps from ``base`` down to ``path`` (``path`` must be at or below ``base``)."""
    if not is_prefix(base, path):
        raise ValueError(f"{path} is not at or below {base}")
    return split(path)[len(split(base)):]


def depth(path: str) -> int:
    return len(split(path))
