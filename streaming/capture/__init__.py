"""PostgreSQL as a live source: a capture that turns a publication into ops (docs/sources.md).

The capture reads the publication's tables from the catalog (:mod:`.catalog`,
the stream schema), copies their rows from a snapshot consistent with its
replication slot, then follows the slot over the replication protocol
(:mod:`.replication`, ``pgoutput`` messages decoded by :mod:`.pgoutput`) and
turns each committed transaction into ops (:mod:`.changes`). Ops are appended
to a sink (:mod:`.sinks`: an NDJSON file, or a stream's landing directory
through the ingest's landing writer) and confirmed to the slot only once they
are durable, together with the capture's state (:mod:`.state`): killed at any
moment and started again, the sink holds every committed change exactly once.
:mod:`.capture` runs the whole; :mod:`.process` is the supervised process of a
stream, ``python -m streaming cdc`` the command line; :mod:`.cluster` starts a
throwaway PostgreSQL with ``wal_level=logical`` for tests and the demo.
"""

__all__ = ["CaptureError"]


class CaptureError(RuntimeError):
    """The capture cannot go on; the message says why and what to do."""
