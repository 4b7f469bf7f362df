"""`make run`, `make test` and CI share one system-packages step that installs as root or names the command."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "system_packages.sh"


def listed(use: str) -> list[str]:
    packages = []
    for line in (ROOT / "scripts" / "system-packages.txt").read_text().splitlines():
        fields = line.split("#")[0].split()
        if fields and use in fields[1:]:
            packages.append(fields[0])
    return packages


def test_the_lists_cover_what_the_demo_and_the_tests_run_on():
    assert set(listed("run")) >= {"python3-venv", "openjdk-17-jre-headless", "redis-server", "procps"}
    assert set(listed("test")) >= set(listed("run")) | {"chromium", "postgresql"}


@pytest.mark.parametrize("use", ["run", "test"])
def test_on_this_machine_everything_is_installed(use):
    done = subprocess.run([str(SCRIPT), use], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to run as another user")
def test_without_root_a_missing_package_is_named_with_the_one_command_to_run():
    with tempfile.TemporaryDirectory() as scratch:  # pytest's tmp_path is private to root
        Path(scratch).chmod(0o755)
        check_as_nobody(Path(scratch) / "scripts")


def check_as_nobody(scripts: Path) -> None:
    scripts.mkdir()
    shutil.copy(SCRIPT, scripts / SCRIPT.name)
    (scripts / "system-packages.txt").write_text("procps run test\nkwmonitor-no-such-package test  # missing\n")
    scripts.chmod(0o755)
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    done = subprocess.run([*as_nobody, str(scripts / SCRIPT.name), "test"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "missing system packages for make test: kwmonitor-no-such-package" in done.stderr
    assert f"sudo {scripts / SCRIPT.name} test" in done.stderr
    assert subprocess.run([*as_nobody, str(scripts / SCRIPT.name), "run"], timeout=60).returncode == 0


@pytest.mark.parametrize("target", ["run", "test"])
def test_make_checks_the_packages_before_anything_else(target):
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}  # also under make test
    done = subprocess.run(["make", "--no-print-directory", "-n", "-B", target], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"scripts/system_packages.sh {target}"


def test_ci_runs_exactly_make_test():
    commands = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    assert commands[-1] == "make test" and not any("apt-get" in line for line in commands)
