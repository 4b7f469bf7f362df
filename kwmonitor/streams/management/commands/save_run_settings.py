"""``manage.py save_run_settings [NAME ...]``: write the settings this process runs with into the env file."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from kwmonitor.envfile import set_values


class Command(BaseCommand):
    help = (
        "Write the settings this process runs with into the local env file (ENV_FILE, by default var/.env): every "
        "setting read from the environment that is set (in the environment or in the file), and the variables "
        "named (e.g. SPARK_LOCAL_IP, which Spark reads). `make run` does this, so a component started by hand "
        "from the repository root gets the settings of the demo."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("names", nargs="*", help="other environment variables to write when set")

    def handle(self, *args, **options) -> None:
        path, changed = self.save(options["names"])
        self.stdout.write(f"settings written to {path}" + (f" ({', '.join(changed)} changed)" if changed else ""))

    def save(self, names: list[str]) -> tuple[Path, list[str]]:
        wanted = [name for name in (*settings.ENV_SETTINGS, *names) if name != "ENV_FILE"]
        values = {name: os.environ[name] for name in dict.fromkeys(wanted) if name in os.environ}
        return settings.ENV_FILE, set_values(settings.ENV_FILE, values)
