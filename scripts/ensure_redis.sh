#!/usr/bin/env bash
# Make sure a Redis server answers on the given URL (default REDIS_URL):
# start redis-server from PATH on localhost if none answers, installing it with
# apt-get when running as root and it is missing; otherwise explain and fail.
set -euo pipefail
cd "$(dirname "$0")/.."
url="${1:-${REDIS_URL:-redis://127.0.0.1:6379/0}}"
PY=.venv/bin/python

ping() { $PY -c 'import sys, redis; redis.Redis.from_url(sys.argv[1], socket_connect_timeout=2).ping()' "$url" 2>/dev/null; }

ping && exit 0

read -r host port < <($PY -c 'import sys; from urllib.parse import urlsplit; u = urlsplit(sys.argv[1]); print(u.hostname or "127.0.0.1", u.port or 6379)' "$url")
case "$host" in
    127.0.0.1|localhost|::1) ;;
    *) echo "Redis does not answer on $url (a remote host: start it there, or set REDIS_URL)" >&2; exit 2 ;;
esac

if ! command -v redis-server >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing redis-server with apt-get"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    else
        echo "Redis does not answer on $url and redis-server is not installed: install it (e.g. apt-get install redis-server) or set REDIS_URL" >&2
        exit 2
    fi
fi

mkdir -p var/redis
echo "starting redis-server on $host:$port (data in var/redis, log in var/redis/redis.log)"
redis-server --bind "$host" --port "$port" --dir "$PWD/var/redis" --daemonize yes \
    --logfile "$PWD/var/redis/redis.log" --pidfile "$PWD/var/redis/redis.pid" --save "" --appendonly no
for _ in $(seq 50); do ping && exit 0; sleep 0.1; done
echo "redis-server did not answer on $url; see var/redis/redis.log" >&2
exit 2
