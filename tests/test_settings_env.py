"""Settings: safe production defaults, defaults that work on a fresh machine,
and docker/.env.example listing exactly the settings read from the environment."""

from __future__ import annotations

import ast
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ROOT / "kwmonitor" / "settings.py"


def settings_read_from_environment() -> set[str]:
    """Names passed to ``env(...)``, ``env.<cast>(...)`` or ``_path(...)`` in settings.py."""
    names = set()
    for node in ast.walk(ast.parse(SETTINGS.read_text())):
        if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        func = node.func
        if (isinstance(func, ast.Name) and func.id in ("env", "_path")) or (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "env"
            and func.attr != "read_env"
        ):
            names.add(node.args[0].value)
    return names


def example_names() -> set[str]:
    text = (ROOT / "docker" / ".env.example").read_text()
    return set(re.findall(r"^([A-Z][A-Z0-9_]*)=", text, flags=re.M))


def run(code_or_args, **env) -> subprocess.CompletedProcess:
    """Python in a clean environment: only PATH/HOME and ``env``, no local env file."""
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    base.update({"ENV_FILE": "/nonexistent/.env", "DJANGO_SETTINGS_MODULE": "kwmonitor.settings"}, **env)
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else code_or_args
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=base, capture_output=True, text=True, timeout=120)


def test_env_example_lists_exactly_the_settings_read_from_the_environment():
    read = settings_read_from_environment()
    assert {"DEBUG", "SECRET_KEY", "DATABASE_URL", "REDIS_URL", "SPARK_MASTER", "LANDING_DIR", "CHECKPOINT_DIR",
            "EVALUATOR_COMMAND", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS"} <= read
    assert example_names() == read


def test_secret_key_is_required_when_debug_is_off():
    proc = run("import django; django.setup()")
    assert proc.returncode != 0 and "SECRET_KEY is required when DEBUG is off" in proc.stderr
    assert run("import django; django.setup()", DEBUG="on").returncode == 0


def test_check_deploy_is_clean_with_debug_off_and_a_secret_key(tmp_path):
    proc = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"],
               SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="kwmonitor.example.com",
               DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert proc.returncode == 0, proc.stderr
    assert "System check identified no issues" in proc.stdout


def test_defaults_work_on_a_fresh_machine():
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps({'debug': s.DEBUG, 'db': str(s.DATABASES['default']['NAME']), "
        "'engine': s.DATABASES['default']['ENGINE'], 'redis': s.REDIS_URL, 'master': s.SPARK_MASTER, "
        "'landing': str(s.LANDING_DIR), 'cmd': s.EVALUATOR_COMMAND, 'https': s.SECURE_SSL_REDIRECT, "
        "'serializer': [s.CELERY_TASK_SERIALIZER, s.CELERY_ACCEPT_CONTENT]}))"
    )
    proc = run(code, SECRET_KEY="x" * 50)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["debug"] is False and got["https"] is True
    assert got["engine"] == "django.db.backends.sqlite3" and got["db"] == str(ROOT / "var" / "db.sqlite3")
    assert got["redis"] == "redis://127.0.0.1:6379/0" and got["master"] == "local[2]"
    assert got["landing"] == str(ROOT / "var" / "landing")
    assert got["cmd"][1:3] == ["-m", "streaming.spark"] and "{evaluator}" in got["cmd"]
    assert got["serializer"] == ["json", ["json"]]


def test_env_file_is_read_and_the_environment_wins(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text("SECRET_KEY=from-the-file-" + "y" * 40 + "\nHTTPS=off\nSPARK_MASTER=spark://file:7077\n")
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.SECRET_KEY[:14], s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.SPARK_MASTER)")
    proc = run(code, ENV_FILE=str(env_file), SPARK_MASTER="spark://env:7077")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["from-the-file-", "False", "False", "spark://env:7077"]


def script(name: str, **env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    return subprocess.run(["bash", str(ROOT / "scripts" / name)], cwd=ROOT, env=dict(base, **env),
                          capture_output=True, text=True, timeout=120)


def test_make_test_explains_a_missing_postgres_or_redis():
    proc = script("test.sh", DATABASE_URL="postgres://postgres@127.0.0.1:1/test")
    assert proc.returncode == 2 and "PostgreSQL is not reachable for DATABASE_URL=postgres://postgres@127.0.0.1:1/test" in proc.stderr
    proc = script("ensure_redis.sh", REDIS_URL="redis://192.0.2.1:6379/0")
    assert proc.returncode == 2 and "Redis does not answer on redis://192.0.2.1:6379/0 (a remote host" in proc.stderr


def test_ensure_redis_starts_a_server_when_none_answers(tmp_path):
    import socket

    import redis

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    proc = script("ensure_redis.sh", REDIS_URL=url)
    client = redis.Redis.from_url(url)
    try:
        assert proc.returncode == 0, proc.stderr
        assert f"starting redis-server on 127.0.0.1:{port}" in proc.stdout
        assert client.ping()
        assert script("ensure_redis.sh", REDIS_URL=url).stdout == ""  # already answering: nothing to do
    finally:
        client.shutdown(nosave=True)
