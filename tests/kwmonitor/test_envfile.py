"""The settings `make run` uses are written to the env file, and a component started by hand reads them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kwmonitor.envfile import WRITTEN_BY_MAKE_RUN, set_values

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, **env: str) -> str:
    """``code`` in a process whose environment is only PATH, HOME and ``env`` (as a shell of a new terminal)."""
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(base, **env), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_set_values_rewrites_a_named_line_in_place_appends_the_others_and_keeps_the_rest(tmp_path):
    path = tmp_path / ".env"
    path.write_text("# mine\nSECRET_KEY=k\nREDIS_URL=redis://old:6379/0\nHTTPS=off\n")
    command = "{python} -m x --a '{b}' \"c\""
    assert set_values(path, {"SECRET_KEY": "k", "REDIS_URL": "redis://new:6379/5", "EVALUATOR_COMMAND": command,
                             "QUOTED": "'q'"}) == ["REDIS_URL", "EVALUATOR_COMMAND", "QUOTED"]
    lines = path.read_text().splitlines()
    assert lines[:5] == ["# mine", "SECRET_KEY=k", "REDIS_URL=redis://new:6379/5", "HTTPS=off", WRITTEN_BY_MAKE_RUN]
    assert path.stat().st_mode & 0o777 == 0o600
    read = json.loads(run_python(
        f"import environ, json, os; environ.Env.read_env({str(path)!r}); "
        "print(json.dumps({k: os.environ[k] for k in ('SECRET_KEY', 'REDIS_URL', 'EVALUATOR_COMMAND', 'QUOTED')}))"))
    assert read == {"SECRET_KEY": "k", "REDIS_URL": "redis://new:6379/5", "EVALUATOR_COMMAND": command, "QUOTED": "'q'"}
    assert set_values(path, {"REDIS_URL": "redis://new:6379/5"}) == []  # the same run again changes nothing
    assert path.read_text().count(WRITTEN_BY_MAKE_RUN) == 1


def test_a_component_started_by_hand_gets_the_settings_make_run_ran_with(tmp_path):
    env_file = tmp_path / "var" / ".env"
    subprocess.run(["bash", "scripts/ensure_env.sh"], cwd=ROOT, env=dict(os.environ, ENV_FILE=str(env_file)),
                   check=True, capture_output=True, timeout=60)
    # The environment scripts/run.sh gives its components, then what it runs to write the settings.
    run_env = dict(
        os.environ, ENV_FILE=str(env_file), REDIS_URL="redis://127.0.0.1:6379/13", ASC_MONITOR_PERIOD="30",
        VAR_DIR=str(tmp_path / "demo-var"), SPARK_LOCAL_IP="127.0.0.1", SPARK_MASTER="spark://127.0.0.1:7077",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", KW_DSN_DEMO="host=/tmp/pg port=5439 dbname=shop",
    )
    proc = subprocess.run([sys.executable, "manage.py", "save_run_settings", "SPARK_LOCAL_IP", "KW_DSN_DEMO"],
                          cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"settings written to {env_file}" in proc.stdout
    # A worker started by hand as the README says: only the env file tells it the demo's settings.
    code = (
        "import json, os; import django; import kwmonitor.celery as c; django.setup(); "
        "from django.conf import settings as s; "
        "print(json.dumps({'broker': c.app.conf.broker_url, 'redis': s.REDIS_URL, 'asc': s.ASC_MONITOR_PERIOD, "
        "'var': str(s.VAR_DIR), 'db': str(s.DATABASES['default']['NAME']), 'master': s.SPARK_MASTER, "
        "'spark_ip': os.environ.get('SPARK_LOCAL_IP'), 'dsn': os.environ.get('KW_DSN_DEMO'), "
        "'https': s.SECURE_SSL_REDIRECT}))"
    )
    got = json.loads(run_python(code, ENV_FILE=str(env_file)))
    assert got == {"broker": "redis://127.0.0.1:6379/13", "redis": "redis://127.0.0.1:6379/13", "asc": 30,
                   "var": str(tmp_path / "demo-var"), "db": str(tmp_path / "db.sqlite3"),
                   "master": "spark://127.0.0.1:7077", "spark_ip": "127.0.0.1",
                   "dsn": "host=/tmp/pg port=5439 dbname=shop", "https": False}
