"""``manage.py halt_evaluators``: stop every evaluator process of this installation on this host."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from kwmonitor.streams.models import Evaluator
from kwmonitor.streams.supervisor import Supervisor


class Command(BaseCommand):
    help = (
        "Stop every evaluator process of this installation running on this host, with its Spark JVM (SIGTERM, then "
        "SIGKILL after the stop timeout), keeping each evaluator's desired state: those that should run are "
        "started again by the next supervision round once the installation is back. Stop Celery beat and the "
        "worker first, or they restart them. `make run` does this on Ctrl-C."
    )

    def handle(self, *args, **options) -> None:
        halted = self.halt()
        for evaluator, pid, detail in halted:
            jvm = "" if evaluator.role == "capture" else "its Spark JVM with it; "
            self.stdout.write(f"stopped the {evaluator} (pid {pid}, {jvm}{detail})")
        if not halted:
            self.stdout.write("no evaluator was running on this host")

    def halt(self) -> list[tuple[Evaluator, int, str]]:
        return Supervisor().halt_local()
