#!/usr/bin/env bash
# Run the whole test suite (every marker) against the real PostgreSQL and Redis, starting local ones
# that do not answer (the system packages are checked by `make test` before).
set -euo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
PY=.venv/bin/python

scripts/ensure_postgres.sh
if ! $PY - <<'PY'
import os, sys
import environ, psycopg
cfg = environ.Env.db_url_config(os.environ["DATABASE_URL"])
if "postgresql" not in cfg["ENGINE"]:
    sys.exit(0)
try:
    psycopg.connect(host=cfg["HOST"] or "localhost", port=cfg["PORT"] or 5432, user=cfg["USER"],
                    password=cfg["PASSWORD"] or None, dbname="postgres", connect_timeout=5).close()
except Exception as exc:
    sys.exit(f"PostgreSQL is not reachable for DATABASE_URL={os.environ['DATABASE_URL']}: {exc}\n"
             "Start PostgreSQL (or set DATABASE_URL to a server the tests may create a test database on).")
PY
then exit 2; fi

scripts/ensure_redis.sh "$REDIS_URL"

exec .venv/bin/pytest -p no:cacheprovider --durations=10 "$@"
