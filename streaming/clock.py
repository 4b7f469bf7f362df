"""A stream's guard against absurd timestamps: the range ``ts`` must lie in and how far one op may move the clock.

A stream's clock is the event time of the last op that moved it
(docs/ops.md, "The stream clock"). One op with a well-formed but absurd
``ts`` (``1e15``, or ``1e9`` on a stream at 1,000 s) would otherwise move the
clock there: every window and result of the stream would end at that op and
every later op would be late. The guard refuses such an op as a dead letter
with its reason, at ingest and in the engine alike, and the clock stays
where it was.

>>> guard = ClockGuard(max_jump=3600)
>>> guard.refuse(1e15, None)
'ts 1e+15 is outside the stream\\'s range [-62135596800, 253402300799] (its ts_min and ts_max settings)'
>>> guard.refuse(5000.0, 1000.0) is None
True
>>> guard.refuse(1e9, 1000.0)
'ts 1e+09 jumps 999999000 s past the stream clock 1000 (at most 3600 s: its max_clock_jump setting)'
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["TS_MIN", "TS_MAX", "MAX_CLOCK_JUMP", "ClockGuard"]

#: 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z in Unix seconds: any ts a date can be made of.
TS_MIN = -62_135_596_800.0
TS_MAX = 253_402_300_799.0
#: 30 days: a stream may pause for weeks, but one op may not end every window of the stream at once.
MAX_CLOCK_JUMP = 30 * 86_400.0


class ClockGuard(BaseModel):
    """``ts_min <= ts <= ts_max``, and ``ts <= clock + max_jump`` once the stream has a clock
    (``max_jump`` None: no limit)."""

    ts_min: float = TS_MIN
    ts_max: float = TS_MAX
    max_jump: float | None = Field(default=MAX_CLOCK_JUMP, gt=0)

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="after")
    def _ordered(self) -> "ClockGuard":
        if not self.ts_min <= self.ts_max:
            raise ValueError(f"ts_min {self.ts_min:g} must not be above ts_max {self.ts_max:g}")
        return self

    def refuse(self, ts: float, clock: float | None) -> str | None:
        """Why an op at ``ts`` may not move a stream clock at ``clock`` (None: it may)."""
        if not self.ts_min <= ts <= self.ts_max:
            return (f"ts {ts:g} is outside the stream's range [{self.ts_min:.0f}, {self.ts_max:.0f}] "
                    "(its ts_min and ts_max settings)")
        if clock is not None and self.max_jump is not None and ts - clock > self.max_jump:
            return (f"ts {ts:g} jumps {ts - clock:.0f} s past the stream clock {clock:g} "
                    f"(at most {self.max_jump:g} s: its max_clock_jump setting)")
        return None
