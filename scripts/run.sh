#!/usr/bin/env bash
# `make run`: bring the E-commerce demo up on this machine and keep it up until Ctrl-C.
# Redis (started if none answers), migrations, the demo schema/user/stream/queries, then
# daphne (web), a Celery worker and beat, the demo stream's evaluator and a feeder replaying
# demo ops into the stream. Logs go to var/log/. Ctrl-C stops everything started here.
set -euo pipefail
cd "$(dirname "$0")/.."
export DJANGO_SETTINGS_MODULE=kwmonitor.settings
# The demo's Spark (local[2]) binds to loopback only.
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
PY=.venv/bin/python
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
DEMO_RATE="${DEMO_RATE:-20}"
DEMO_OPS="${DEMO_OPS:-20000}"  # demo ops generated; fed at DEMO_RATE ops/s, one landing file a second
started_at=$(date +%s%N)
mkdir -p var/log var/demo

scripts/ensure_env.sh
setting() { $PY -c "import django; django.setup(); from django.conf import settings; print(settings.$1)"; }
REDIS_URL="$(setting REDIS_URL)"
export REDIS_URL

redis_was_up=yes
$PY -c 'import sys, redis; redis.Redis.from_url(sys.argv[1], socket_connect_timeout=2).ping()' "$REDIS_URL" 2>/dev/null || redis_was_up=no
scripts/ensure_redis.sh "$REDIS_URL"

$PY manage.py migrate --noinput -v 0
[ -s var/demo/password ] || (umask 077 && $PY -c 'import secrets; print(secrets.token_urlsafe(9))' > var/demo/password)
DEMO_PASSWORD="$(cat var/demo/password)"
demo="$($PY manage.py load_demo --password "$DEMO_PASSWORD")"
STREAM_ID="$(sed -n "s/.*stream 'shop' (id \([0-9]*\)).*/\1/p" <<<"$demo")"
[ -n "$STREAM_ID" ] || { echo "load_demo did not report the demo stream: $demo" >&2; exit 1; }

# Demo ops: the engine's E-commerce workload generator (generated once, replayed on every run).
if [ ! -s var/demo/ops.ndjson ]; then
    $PY -m streaming workload ecommerce --out-dir var/demo/workload --ops "$DEMO_OPS" --seed 7 >/dev/null
    mv var/demo/workload/ops.ndjson var/demo/ops.ndjson
fi

pids=()
cleanup() {
    trap - INT TERM EXIT
    echo
    echo "stopping..."
    $PY manage.py stop_evaluator shop >/dev/null 2>&1 || true
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ "$redis_was_up" = no ] && [ -s var/redis/redis.pid ]; then
        kill -TERM "$(cat var/redis/redis.pid)" 2>/dev/null || true
    fi
    echo "stopped"
}
trap 'cleanup; exit 0' INT TERM
trap cleanup EXIT

.venv/bin/daphne -b "$HOST" -p "$PORT" kwmonitor.asgi:application >var/log/web.log 2>&1 &
pids+=($!)
$PY -m celery -A kwmonitor worker --loglevel INFO --concurrency 2 >var/log/worker.log 2>&1 &
pids+=($!)
$PY -m celery -A kwmonitor beat --loglevel INFO --schedule var/celerybeat-schedule >var/log/beat.log 2>&1 &
pids+=($!)

URL="http://$HOST:$PORT/"
web_up=no
for _ in $(seq 600); do
    if $PY -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "${URL}accounts/login/" 2>/dev/null; then
        web_up=yes; break
    fi
    if ! kill -0 "${pids[0]}" 2>/dev/null; then break; fi
    sleep 0.2
done
if [ "$web_up" = no ]; then
    echo "the web server does not answer on ${URL}accounts/login/; see var/log/web.log:" >&2
    tail -n 20 var/log/web.log >&2
    exit 1
fi
web_up_ms=$(( ($(date +%s%N) - started_at) / 1000000 ))

# Each run replays the demo from its start: a fresh stream (seq 0, empty window and history).
$PY manage.py reset_stream shop --no-input
$PY manage.py start_evaluator shop
$PY manage.py replay var/demo/ops.ndjson --stream "$STREAM_ID" --rate "$DEMO_RATE" --batch-size "$DEMO_RATE" >var/log/feeder.log 2>&1 &
pids+=($!)

cat <<MSG

  kwmonitor is up: $URL   (web up ${web_up_ms} ms after start)
  log in as:  demo / $DEMO_PASSWORD   (staff: the admin is at ${URL}admin/)
  demo stream 'shop' (id $STREAM_ID) fed at $DEMO_RATE ops/s from var/demo/ops.ndjson
  logs: var/log/{web,worker,beat,feeder,evaluator-*}.log        Ctrl-C stops everything

MSG
wait "${pids[@]}"
