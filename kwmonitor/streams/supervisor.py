"""Starting, stopping and supervising evaluator processes.

An evaluator is a detached process (``settings.EVALUATOR_COMMAND``, a
pre-processor ``settings.PREPROCESSOR_COMMAND``, the capture of a PostgreSQL
source ``settings.CAPTURE_COMMAND``) that writes a heartbeat to Redis every
few seconds. The operator starts and stops a stream's primary evaluator; its
secondary evaluators, pre-processor and capture follow it while the stream
wants them, and a secondary evaluator's first start copies the
primary's stored tuples and applied seq, so every evaluator of a stream
holds the same store (``streaming.placement``). The database records what the
operator wants (``desired``) and what the supervisor did (``lifecycle``:
launched, stopping, stopped, failed, and when; the launched ``pid`` and
``host``; the last error and the next restart), never what a heartbeat says:
that is the live status (:mod:`kwmonitor.streams.liveness`), and the process
announces its own transitions (running, ...) on the stream's events.
:meth:`Supervisor.supervise`, run by Celery beat every few seconds, makes the
two agree: it (re)starts an evaluator that should run and has died, gone
silent (no heartbeat for ``heartbeat_timeout`` after its last one, or for
``start_grace`` after its launch, counted from Redis's start if that is
later) or stalled (its heartbeat says no batch was applied for
``stall_seconds`` while input waited), with an exponential backoff over
consecutive failures, and stops one that should not run. An op that stalled
or crashed an evaluator ``poison_failures`` times in a row is set aside for
the stream as a dead letter (:mod:`kwmonitor.streams.poison`), so the
restarted evaluator goes past it (docs/ops.md, "Stalls and poison ops"). Each
evaluator row is claimed with ``SELECT ... FOR UPDATE SKIP LOCKED``, so
several workers never act on the same evaluator at once. Its transitions
reach dashboards through :mod:`kwmonitor.streams.sender` after commit.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from streaming import bus
from streaming.evaluator_state import StateField
from streaming.events import EvaluatorStatus

from .connection import redis_client
from .liveness import seen_since_launch
from .models import Evaluator, Stream
from .plans import advance_placement, publish_plan
from .poison import PoisonWatch
from .sender import Transition, send_status

__all__ = ["SupervisorSettings", "Supervisor", "process_alive", "process_start_ticks", "spawn_detached", "backoff_seconds",
           "redis_started_at"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SupervisorSettings:
    command: tuple[str, ...]
    preprocessor_command: tuple[str, ...]
    heartbeat_timeout: float
    start_grace: float
    stable_after: float
    backoff: float
    backoff_max: float
    stop_timeout: float
    log_dir: Path
    capture_command: tuple[str, ...] = ()
    stall_seconds: float = 10.0
    poison_failures: int = 2

    @classmethod
    def from_django(cls) -> "SupervisorSettings":
        return cls(
            command=tuple(settings.EVALUATOR_COMMAND),
            preprocessor_command=tuple(settings.PREPROCESSOR_COMMAND),
            capture_command=tuple(settings.CAPTURE_COMMAND),
            heartbeat_timeout=settings.EVALUATOR_HEARTBEAT_TIMEOUT,
            start_grace=settings.EVALUATOR_START_GRACE_SECONDS,
            stable_after=settings.EVALUATOR_STABLE_SECONDS,
            backoff=settings.EVALUATOR_BACKOFF_SECONDS,
            backoff_max=settings.EVALUATOR_BACKOFF_MAX_SECONDS,
            stop_timeout=settings.EVALUATOR_STOP_TIMEOUT_SECONDS,
            log_dir=Path(settings.EVALUATOR_LOG_DIR),
            stall_seconds=settings.EVALUATOR_STALL_SECONDS,
            poison_failures=settings.EVALUATOR_POISON_FAILURES,
        )


def backoff_seconds(failures: int, base: float, cap: float) -> float:
    """Delay before restart number ``failures`` (1 = first failure): base, 2 base, 4 base ... capped."""
    return min(cap, base * 2 ** max(0, failures - 1))


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (field 3 onwards), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()


def process_start_ticks(pid: int) -> int | None:
    """When the process started (clock ticks since boot): with the pid, a process's identity."""
    fields = _proc_stat(pid)
    return int(fields[19]) if fields else None


def process_alive(pid: int | None, start_ticks: int | None = None) -> bool:
    """Whether ``pid`` runs (a zombie does not) and, given ``start_ticks``, is the process started then.

    Comparing the start time guards against a recycled pid (and, unlike the
    command line, survives an ``exec`` by a wrapper script).
    """
    if not pid:
        return False
    if not Path("/proc/self/stat").exists():  # not Linux: only existence can be checked
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    fields = _proc_stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return start_ticks is None or int(fields[19]) == start_ticks


def spawn_detached(command: list[str], log_path: Path, cwd: Path) -> int:
    """Start ``command`` in its own session, detached from this process (double fork).

    The process is re-parented to init, so it survives the worker that
    started it and never lingers as this worker's zombie. Returns its pid.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the intermediate process: start the evaluator, report its pid, exit
        try:
            os.close(read_end)
            with open(log_path, "ab") as log_file:
                proc = subprocess.Popen(
                    command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                    close_fds=True, start_new_session=True,
                )
            os.write(write_end, f"{proc.pid}".encode())
        except BaseException as exc:  # reported to the parent, which raises it
            os.write(write_end, f"error:{exc!r}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 4096):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(child, 0)
    reply = b"".join(chunks).decode()
    if not reply.isdigit():
        raise OSError(f"could not start {command[0]!r}: {reply.removeprefix('error:') or 'no reply'}")
    return int(reply)


def redis_started_at(client: redis.Redis) -> float:
    """When the Redis server started (unix time)."""
    return time.time() - float(client.info("server")["uptime_in_seconds"])


def _signal_group(pid: int, start_ticks: int | None, sig: int) -> None:
    """Signal the evaluator's process group (it leads its own session), if it is still that process."""
    if not process_alive(pid, start_ticks):
        return
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group led by ``pgid`` (an evaluator's, with its JVM) still runs."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Supervisor:
    """The operator actions on evaluators; every method works on committed rows."""

    def __init__(self, config: SupervisorSettings | None = None, hostname: str | None = None):
        self.config = config or SupervisorSettings.from_django()
        self.hostname = hostname or socket.gethostname()
        self.poison = PoisonWatch(self.config.poison_failures)

    # commands

    def command_for(self, evaluator: Evaluator) -> list[str]:
        stream = evaluator.stream
        values = {
            "python": sys.executable,
            "evaluator": evaluator.pk,
            "stream": evaluator.stream_id,
            "redis_url": settings.REDIS_URL,
            "checkpoint_dir": evaluator.checkpoint_dir(),
            "master": settings.SPARK_MASTER,
            "asc_period": settings.ASC_MONITOR_PERIOD,
            "plan_evaluator": stream.evaluator.pk,
            "out": stream.derived_path().resolve(),
            "dsn_env": stream.source_dsn_env,
            "publication": stream.source_publication,
            "slot": stream.source_slot,
            "landing": stream.landing_path().resolve(),
            "state": evaluator.capture_state_path().resolve(),
        }
        template = {"preprocessor": self.config.preprocessor_command,
                    "capture": self.config.capture_command}.get(evaluator.role, self.config.command)
        return [arg.format(**values) for arg in template]

    def log_path(self, evaluator: Evaluator) -> Path:
        name = evaluator.role if evaluator.role in ("preprocessor", "capture") else "evaluator"
        return self.config.log_dir / f"{name}-{evaluator.pk}.log"

    # operator actions

    def start(self, evaluator_id: int) -> Evaluator:
        """Make the evaluator run: launch it now unless it already runs.

        A launch here starts a new run: its restart count and last error
        start over (the earlier run's status events stay in the stream's history).
        """
        with transaction.atomic():
            evaluator = Evaluator.objects.select_for_update().select_related("stream").get(pk=evaluator_id)
            evaluator.desired = "running"
            evaluator.failures = 0
            evaluator.next_restart_at = None
            evaluator.save(update_fields=["desired", "failures", "next_restart_at"])
            if not self._runs_here(evaluator):
                evaluator.restarts, evaluator.last_error = 0, ""
                self._launch(evaluator, "starting")
        return evaluator

    def stop(self, evaluator_id: int) -> Evaluator:
        """Make the evaluator stop: SIGTERM, then SIGKILL after the stop timeout.

        "stopping" is committed (and shown) before waiting for the process,
        and the row is not locked while waiting.
        """
        with transaction.atomic():
            evaluator = Evaluator.objects.select_for_update().select_related("stream").get(pk=evaluator_id)
            evaluator.desired = "stopped"
            evaluator.next_restart_at = None
            remote = bool(evaluator.pid) and not self._local(evaluator)
            if not remote and not self._runs_here(evaluator):
                self._set_stopped(evaluator, "stopped by the operator")
                return evaluator
            self._record(evaluator, "stopping")
            evaluator.save()
            send_status(evaluator, "stopping", "stopped by the operator")
        if remote:  # only its own host can signal it: that host's supervise round will
            return evaluator
        detail = self._terminate_process(evaluator.pid, evaluator.process_start)
        with transaction.atomic():
            evaluator = Evaluator.objects.select_for_update().select_related("stream").get(pk=evaluator_id)
            if evaluator.desired == "stopped" and not self._runs_here(evaluator):
                self._set_stopped(evaluator, f"stopped by the operator{detail}")
        return evaluator

    def halt_local(self) -> list[tuple[Evaluator, int, str]]:
        """Stop every evaluator process running on this host, keeping what the operator asked for.

        For shutting the installation down (``make run`` on Ctrl-C): each
        process group (the evaluator and its Spark JVM) gets SIGTERM, then
        SIGKILL after the stop timeout; the row is marked stopped with its
        ``desired`` state kept, so the next supervision round after a restart
        brings back the evaluators that should run. Returns (evaluator, pid,
        detail) of each process stopped.
        """
        halted = []
        for evaluator_id in Evaluator.objects.filter(host=self.hostname, pid__isnull=False).order_by("pk") \
                .values_list("pk", flat=True):
            with transaction.atomic():
                evaluator = Evaluator.objects.select_for_update().select_related("stream").get(pk=evaluator_id)
                pid, start = evaluator.pid, evaluator.process_start
                if not pid or not self._runs_here(evaluator):
                    continue
                self._record(evaluator, "stopping")
                evaluator.save(update_fields=["lifecycle", "lifecycle_at"])
                send_status(evaluator, "stopping", "the installation is shutting down")
            detail = "the installation shut down" + self._terminate_process(pid, start)
            with transaction.atomic():
                evaluator = Evaluator.objects.select_for_update().select_related("stream").get(pk=evaluator_id)
                if evaluator.pid == pid:
                    self._set_stopped(evaluator, detail)
            halted.append((evaluator, pid, detail))
        return halted

    def supervise(self) -> list[tuple[int, str]]:
        """One supervision round over every evaluator; returns (evaluator id, action) pairs."""
        actions = []
        for evaluator_id in Evaluator.objects.order_by("pk").values_list("pk", flat=True):
            with transaction.atomic():
                evaluator = (
                    Evaluator.objects.select_for_update(skip_locked=True)
                    .select_related("stream")
                    .filter(pk=evaluator_id)
                    .first()
                )
                if evaluator is None:  # claimed by another worker this round
                    continue
                action = self.check(evaluator)
            if action:
                actions.append((evaluator_id, action))
        for stream_id in Stream.objects.filter(evaluator_processes__gt=1).values_list("pk", flat=True):
            try:
                action = advance_placement(stream_id)
            except Exception:  # Redis away: the next round tries again
                log.exception("placement of stream %s", stream_id)
                continue
            if action:
                actions.append((0, f"stream {stream_id}: {action}"))
        return actions

    # one evaluator (called with its row locked)

    def check(self, evaluator: Evaluator) -> str:
        """Bring one evaluator toward its desired state; returns what was done ("" = nothing)."""
        now = timezone.now()
        if evaluator.role != "primary":
            follows = evaluator.stream.evaluator.desired if evaluator.wanted else "stopped"
            if follows != evaluator.desired:
                evaluator.desired = follows
                evaluator.failures, evaluator.next_restart_at = 0, None
                evaluator.save(update_fields=["desired", "failures", "next_restart_at"])
        if evaluator.desired == "stopped":
            if evaluator.pid and self._local(evaluator) and process_alive(evaluator.pid, evaluator.process_start):
                self._terminate(evaluator, "stopped: desired state is stopped")
                return "stopped"
            if evaluator.pid and not self._local(evaluator) and self._beating(evaluator):
                return ""  # alive on another host, whose supervisor stops it
            if evaluator.lifecycle != "stopped":
                self._set_stopped(evaluator, "")
                return "marked stopped"
            return ""

        if evaluator.pid is None:
            if evaluator.next_restart_at is None or now >= evaluator.next_restart_at:
                self._launch(evaluator, "restarting" if evaluator.restarts or evaluator.failures else "starting")
                return "launched"
            return ""

        if self._local(evaluator) and not process_alive(evaluator.pid, evaluator.process_start):
            reason = f"process {evaluator.pid} exited"
            op = self.poison.failed_op(evaluator)
            if op is not None:
                reason += f" while applying seq {op['seq']}: {op['error']}"
                reason += self.poison.record_failure(evaluator, op["seq"], "crashed", op["error"])
            self._fail(evaluator, reason, now)
            return "died"

        self._ensure_plan(evaluator)
        heartbeat = self._beating(evaluator)
        if heartbeat is not None and self._local(evaluator) \
                and heartbeat.stalled_for(now.timestamp()) > self.config.stall_seconds:
            stall = heartbeat.stall_detail(now.timestamp())
            _signal_group(evaluator.pid, evaluator.process_start, signal.SIGKILL)
            reason = f"stalled: {stall}"
            op = self.poison.failed_op(evaluator)
            seq = heartbeat.applying_seq if heartbeat.applying_seq is not None else (op["seq"] if op else None)
            if seq is not None:
                reason += self.poison.record_failure(evaluator, seq, "stalled", stall)
            self._fail(evaluator, reason, now)
            return "stalled"
        if heartbeat is not None:
            self._alive(evaluator, now)
            return ""

        seen = self._seen(evaluator)
        since = seen if seen is not None else (evaluator.started_at or now).timestamp()
        # no heartbeat can have been heard before Redis (re)started (an empty Redis lost the last one's time)
        since = max(since, redis_started_at(redis_client()))
        limit = self.config.heartbeat_timeout if seen is not None else self.config.start_grace
        silent_for = now.timestamp() - since
        if silent_for > limit:
            reason = f"no heartbeat for {silent_for:.0f} s"
            if self._local(evaluator):
                _signal_group(evaluator.pid, evaluator.process_start, signal.SIGKILL)
                op = self.poison.failed_op(evaluator)
                if op is not None:  # a replay that held the process so hard its heartbeat stopped
                    reason += f" while applying seq {op['seq']}"
                    reason += self.poison.record_failure(evaluator, op["seq"], "silenced", reason)
            self._fail(evaluator, reason, now)
            return "silent"
        return ""

    # transitions

    def _local(self, evaluator: Evaluator) -> bool:
        return evaluator.host == self.hostname

    def _beating(self, evaluator: Evaluator) -> EvaluatorStatus | None:
        """The evaluator's current heartbeat, if it comes from the recorded process."""
        heartbeat = bus.read_heartbeat(redis_client(), evaluator.pk)
        return heartbeat if heartbeat is not None and heartbeat.pid in (None, evaluator.pid) else None

    def _seen(self, evaluator: Evaluator) -> float | None:
        """When the launched process last beat, if it beat since its launch (None: not seen since).

        The time kept in Redis is that of the last heartbeat of any process;
        while another process's heartbeat is there (``_beating`` refused it),
        nothing is known of this one.
        """
        client = redis_client()
        if client.exists(bus.Keys.heartbeat(evaluator.pk)):
            return None
        seen = bus.read_last_heartbeat_at(client, evaluator.pk)
        return seen if seen_since_launch(evaluator, seen) else None

    def _runs_here(self, evaluator: Evaluator) -> bool:
        return bool(evaluator.pid) and self._local(evaluator) and process_alive(evaluator.pid, evaluator.process_start)

    def _ensure_plan(self, evaluator: Evaluator) -> None:
        """Rewrite the plans if Redis lost this one or holds another version (Redis restarted, a failed
        write); a pre-processor or a capture reads its primary's plan."""
        if evaluator.role in ("preprocessor", "capture"):
            evaluator = evaluator.stream.evaluator
        plan = bus.read_plan(redis_client(), evaluator.pk)
        if plan is None or plan.version != evaluator.plan_version:
            publish_plan(evaluator.stream_id)
            evaluator.refresh_from_db(fields=["plan_version"])

    def seed(self, evaluator: Evaluator) -> None:
        """A secondary evaluator's first start: copy the primary's stored tuples and applied seq (read in
        one MULTI), so it holds the stream's store and reads on from where the primary got to."""
        client = redis_client()
        state_key = bus.Keys.evaluator_state(evaluator.pk)
        if evaluator.role != "secondary" or client.hexists(state_key, StateField.SEQ):
            return
        primary = evaluator.stream.evaluator.pk
        with client.pipeline(transaction=True) as pipe:
            pipe.hgetall(bus.Keys.evaluator_tuples(primary))
            pipe.hmget(bus.Keys.evaluator_state(primary), [StateField.SEQ, StateField.CLOCK])
            tuples, (seq, clock) = pipe.execute()
        if seq is None:
            return
        with client.pipeline(transaction=True) as pipe:
            pipe.delete(bus.Keys.evaluator_tuples(evaluator.pk))
            if tuples:
                pipe.hset(bus.Keys.evaluator_tuples(evaluator.pk), mapping=tuples)
            pipe.hset(state_key, mapping={StateField.SEQ: seq, **({StateField.CLOCK: clock} if clock else {})})
            pipe.execute()

    def _launch(self, evaluator: Evaluator, status: Transition) -> None:
        """Launch the process; ``status`` ("starting", or "restarting" after a failure) is the event announcing it."""
        self._ensure_plan(evaluator)
        self.seed(evaluator)
        command = self.command_for(evaluator)
        evaluator.checkpoint_dir().mkdir(parents=True, exist_ok=True)
        launched = timezone.now()  # before the spawn: every heartbeat of the new process comes after it
        try:
            pid = spawn_detached(command, self.log_path(evaluator), Path(settings.BASE_DIR))
        except OSError as exc:
            self._fail(evaluator, str(exc), timezone.now())
            return
        if status == "restarting":
            evaluator.restarts += 1
        evaluator.pid, evaluator.host, evaluator.command = pid, self.hostname, command
        evaluator.process_start = process_start_ticks(pid)
        evaluator.started_at, evaluator.next_restart_at = launched, None
        self._record(evaluator, "launched", launched)
        evaluator.save()
        send_status(evaluator, status, f"started pid {pid} on {self.hostname}")
        log.info("evaluator %s: %s pid %s", evaluator.pk, status, pid)

    def _alive(self, evaluator: Evaluator, now: dt.datetime) -> None:
        """A beating process: once it has beaten ``stable_after`` past its launch, earlier failures no longer
        lengthen the backoff. What its heartbeat says is not recorded: it is the live status itself."""
        stable = evaluator.started_at is not None and (now - evaluator.started_at).total_seconds() >= self.config.stable_after
        if stable and evaluator.failures:
            evaluator.failures = 0
            evaluator.save(update_fields=["failures"])

    @staticmethod
    def _record(evaluator: Evaluator, lifecycle: str, at: dt.datetime | None = None) -> None:
        """Set what the supervisor did (saved by the caller), as of ``at`` (default: now, after the deed)."""
        evaluator.lifecycle, evaluator.lifecycle_at = lifecycle, at or timezone.now()

    def _fail(self, evaluator: Evaluator, reason: str, now: dt.datetime) -> None:
        evaluator.failures += 1
        delay = backoff_seconds(evaluator.failures, self.config.backoff, self.config.backoff_max)
        evaluator.pid, evaluator.last_error = None, reason
        evaluator.next_restart_at = now + dt.timedelta(seconds=delay)
        self._record(evaluator, "failed")
        evaluator.save()
        send_status(evaluator, "failed", f"{reason}; restart in {delay:.0f} s")
        log.warning("evaluator %s failed (%s); restart in %.0f s", evaluator.pk, reason, delay)

    def _terminate_process(self, pid: int, start_ticks: int | None) -> str:
        """SIGTERM the process group, SIGKILL it after the stop timeout; returns a note if killed.

        Waits for the whole group (the evaluator and its Spark JVM), not only its leader.
        """
        _signal_group(pid, start_ticks, signal.SIGTERM)
        deadline = time.monotonic() + self.config.stop_timeout
        while process_alive(pid, start_ticks) and time.monotonic() < deadline:
            time.sleep(0.1)
        if process_alive(pid, start_ticks):
            _signal_group(pid, start_ticks, signal.SIGKILL)
            return f"; killed after {self.config.stop_timeout:.0f} s"
        while _group_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _group_alive(pid):
            _kill_group(pid)
            return f"; what remained of its process group was killed after {self.config.stop_timeout:.0f} s"
        return ""

    def _terminate(self, evaluator: Evaluator, detail: str) -> None:
        send_status(evaluator, "stopping", detail)
        detail += self._terminate_process(evaluator.pid, evaluator.process_start)
        self._set_stopped(evaluator, detail)

    def _set_stopped(self, evaluator: Evaluator, detail: str) -> None:
        evaluator.pid = None
        self._record(evaluator, "stopped")
        evaluator.save()
        send_status(evaluator, "stopped", detail)
