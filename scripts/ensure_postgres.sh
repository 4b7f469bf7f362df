#!/usr/bin/env bash
# Make sure the PostgreSQL of DATABASE_URL answers: a local server installed from Debian's packages is
# started (pg_ctlcluster, as root) when it does not; otherwise explain and fail. No-op for SQLite.
set -euo pipefail
cd "$(dirname "$0")/.."
read -r engine host port < <(.venv/bin/python -c '
import os, environ
cfg = environ.Env.db_url_config(os.environ["DATABASE_URL"])
print("postgresql" if "postgresql" in cfg["ENGINE"] else "other", cfg["HOST"] or "127.0.0.1", cfg["PORT"] or 5432)')
[ "$engine" = postgresql ] || exit 0
pg_isready -q -h "$host" -p "$port" 2>/dev/null && exit 0
case "$host" in
    127.0.0.1|localhost|::1) ;;
    *) echo "PostgreSQL does not answer on $host:$port (a remote host: start it there, or set DATABASE_URL)" >&2; exit 2 ;;
esac
if [ "$(id -u)" = 0 ] && command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    version="$(ls /etc/postgresql | sort -V | tail -n 1)"
    echo "starting PostgreSQL $version"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    for _ in $(seq 50); do pg_isready -q -h "$host" -p "$port" && exit 0; sleep 0.2; done
fi
echo "PostgreSQL is not reachable for DATABASE_URL=$DATABASE_URL (nothing answers on $host:$port): start it" \
     "(as root: pg_ctlcluster <version> main start), or set DATABASE_URL to a server the tests may create a test" \
     "database on" >&2
exit 2
