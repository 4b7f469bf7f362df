"""A real long-lived evaluator stand-in for supervision tests.

It takes the evaluator's command-line contract (``--evaluator ID --redis-url
URL --checkpoint-dir DIR [--master M]``), reads its plan, writes a heartbeat
every ``--interval`` seconds, announces its own transitions on the stream's
events (running at its first beat with a plan, stopped) and exits cleanly on
SIGTERM, like the Spark evaluator, without starting Spark. With ``--stalled-at SEQ`` its heartbeat
says what a stalled evaluator's says: running, input waiting past its applied
seq, the apply loop on op SEQ since it started, no batch finished.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from streaming import bus  # noqa: E402
from streaming.events import EvaluatorStatus  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluator", type=int, required=True)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--interval", type=float, default=0.3)
    parser.add_argument("--stalled-at", type=int)
    args = parser.parse_args()
    began = time.time()
    stalled = {} if args.stalled_at is None else {
        "applied_seq": args.stalled_at - 1, "input_seq": args.stalled_at + 10, "progress_at": began,
        "applying_seq": args.stalled_at}
    client = bus.connect(args.redis_url)
    stopping = False
    announced = False

    def on_term(signum, frame) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    Path(args.checkpoint_dir).mkdir(parents=True, exist_ok=True)
    while True:
        plan = bus.read_plan(client, args.evaluator)
        status = EvaluatorStatus(
            evaluator=args.evaluator,
            stream=plan.stream.id if plan is not None else 0,
            status="stopped" if stopping else "running",
            pid=os.getpid(),
            plan_version=plan.version if plan is not None else 0,
            ts=time.time(),
            **stalled,
        )
        if stopping:
            bus.publish_stream_event(client, status.stream, status)
            client.delete(bus.Keys.heartbeat(args.evaluator))
            return 0
        if plan is not None and not announced:  # before the beat: a test that saw the beat finds the event
            bus.publish_stream_event(client, status.stream, status)
            announced = True
        bus.write_heartbeat(client, status)
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
