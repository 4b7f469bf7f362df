#!/usr/bin/env bash
# `make run`: bring the E-commerce demo up on this machine and keep it up until Ctrl-C.
# Redis (started if none answers), migrations, the demo schema/user/stream/queries, then
# daphne (web, started again if it dies), a Celery worker and beat, the demo stream's evaluator and a feeder sending
# the demo feed into the stream until stopped. Logs go to $VAR_DIR/log/ (those of the previous LOG_KEEP runs are kept as
# NAME.log.1, .2, ...). Ctrl-C (or SIGTERM) stops everything
# started here, every evaluator of this installation included (with their Spark JVMs), and says so.
# DEMO_POSTGRES=1 adds a PostgreSQL-sourced stream 'shop-pg': a throwaway PostgreSQL with
# wal_level=logical under $VAR_DIR/pgsource, the demo's tables in it fed with the same feed as SQL,
# captured by the stream's capture process (a second Spark evaluator: give it a minute more).
set -euo pipefail
cd "$(dirname "$0")/.."
export DJANGO_SETTINGS_MODULE=kwmonitor.settings
# The demo's Spark (local[2]) binds to loopback only.
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
PY=.venv/bin/python
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
DEMO_RATE="${DEMO_RATE:-20}"
DEMO_OPS="${DEMO_OPS:-0}"  # demo ops fed at DEMO_RATE ops/s (0: until stopped)
DEMO_POSTGRES="${DEMO_POSTGRES:-0}"  # 1: also the PostgreSQL-sourced stream shop-pg
LOG_KEEP="${LOG_KEEP:-5}"  # the logs of this many previous runs are kept (web.log.1 the last one's)
export VAR_DIR="${VAR_DIR:-var}"
VAR="$VAR_DIR"
# The ASC monitor closes a period every ~10 s of the demo's products (~15% of its ops), and the feed
# changes season every ~20 s, so dropping ratios and rearrangements show within the first minute.
export ASC_MONITOR_PERIOD="${ASC_MONITOR_PERIOD:-$(( DEMO_RATE * 3 / 2 > 10 ? DEMO_RATE * 3 / 2 : 10 ))}"
SHIFT_EVERY=$(( DEMO_RATE * 20 > 100 ? DEMO_RATE * 20 : 100 ))
started_at=$(date +%s%N)
mkdir -p "$VAR/log" "$VAR/demo"
scripts/rotate_logs.sh "$VAR/log" "$LOG_KEEP"

scripts/ensure_env.sh
setting() { $PY -c "import django; django.setup(); from django.conf import settings; print(settings.$1)"; }
REDIS_URL="$(setting REDIS_URL)"
export REDIS_URL

redis_was_up=yes
$PY -c 'import sys, redis; redis.Redis.from_url(sys.argv[1], socket_connect_timeout=2).ping()' "$REDIS_URL" 2>/dev/null || redis_was_up=no
scripts/ensure_redis.sh "$REDIS_URL"

$PY manage.py migrate --noinput -v 0
[ -s "$VAR/demo/password" ] || (umask 077 && $PY -c 'import secrets; print(secrets.token_urlsafe(9))' > "$VAR/demo/password")
DEMO_PASSWORD="$(cat "$VAR/demo/password")"
demo="$($PY manage.py load_demo --password "$DEMO_PASSWORD")"
STREAM_ID="$(sed -n "s/.*stream 'shop' (id \([0-9]*\)).*/\1/p" <<<"$demo")"
[ -n "$STREAM_ID" ] || { echo "load_demo did not report the demo stream: $demo" >&2; exit 1; }

declare -A names=()
pids=()
start() {  # start NAME LOG COMMAND...: run a component in the background, remember its pid
    local name=$1 log=$2
    shift 2
    "$@" >"$log" 2>&1 &
    pids+=($!)
    names[$!]=$name
}
stop() {  # stop PID: SIGTERM, wait, say so
    local pid=$1
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    echo "  stopped ${names[$pid]} (pid $pid)"
}
cleanup() {
    # Stop once: a second INT/TERM (make passes a TERM on to this shell after the process group got
    # one) must not cut the stopping short and leave evaluators running.
    trap '' INT TERM
    trap - EXIT
    set +e
    echo
    echo "stopping..."
    # The feeder first, then beat and the worker (so nothing restarts an evaluator), then every
    # evaluator of this installation on this host with its Spark JVM, then the web server.
    for role in "the feeder" "the PostgreSQL feeder" "Celery beat" "the Celery worker"; do
        for pid in "${pids[@]}"; do if [ "${names[$pid]}" = "$role" ]; then stop "$pid"; fi; done
    done
    $PY manage.py halt_evaluators 2>&1 | sed 's/^/  /' || echo "  could not stop the evaluators: run .venv/bin/python manage.py halt_evaluators" >&2
    for pid in "${pids[@]}"; do if [ "${names[$pid]}" = "the web server" ]; then stop "$pid"; fi; done
    if [ "$DEMO_POSTGRES" = 1 ]; then
        $PY -m streaming.capture.cluster stop --dir "$VAR/pgsource" && echo "  stopped the demo's PostgreSQL ($VAR/pgsource)"
    fi
    if [ "$redis_was_up" = no ] && [ -s "$VAR/redis/redis.pid" ]; then
        kill -TERM "$(cat "$VAR/redis/redis.pid")" 2>/dev/null && echo "  stopped redis-server (pid $(cat "$VAR/redis/redis.pid"))"
    fi
    echo "stopped everything make run started"
}
trap 'cleanup; exit 0' INT TERM
trap cleanup EXIT

if [ "$DEMO_POSTGRES" = 1 ]; then
    KW_DSN_DEMO="$($PY -m streaming.capture.cluster start --dir "$VAR/pgsource")"
    export KW_DSN_DEMO  # the stream names this variable: the web, worker and beat started below inherit it
fi
# Every setting this run uses goes into the env file, so a component started by hand (README) gets the same.
$PY manage.py save_run_settings SPARK_LOCAL_IP KW_DSN_DEMO

# The web server is started again whenever it dies (scripts/keep_up.sh; docs/ops.md "Crashes").
start "the web server" "$VAR/log/web.log" scripts/keep_up.sh .venv/bin/daphne -b "$HOST" -p "$PORT" kwmonitor.asgi:application
start "the Celery worker" "$VAR/log/worker.log" .venv/bin/celery -A kwmonitor worker --loglevel INFO --concurrency 2
start "Celery beat" "$VAR/log/beat.log" .venv/bin/celery -A kwmonitor beat --loglevel INFO --schedule "$VAR/celerybeat-schedule"

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
    echo "the web server does not answer on ${URL}accounts/login/; see $VAR/log/web.log:" >&2
    tail -n 20 "$VAR/log/web.log" >&2
    exit 1
fi
web_up_ms=$(( ($(date +%s%N) - started_at) / 1000000 ))

# Each run replays the demo from its start: a fresh stream (seq 0, empty window and history).
$PY manage.py reset_stream shop --no-input
$PY manage.py start_evaluator shop
FEED_ARGS=(--rate "$DEMO_RATE" --ops "$DEMO_OPS" --shift-every "$SHIFT_EVERY")
start "the feeder" "$VAR/log/feeder.log" $PY manage.py feed_demo --stream shop "${FEED_ARGS[@]}"
PG_NOTE=""
if [ "$DEMO_POSTGRES" = 1 ]; then
    $PY manage.py load_postgres_demo --username demo
    $PY manage.py reset_stream shop-pg --no-input
    $PY manage.py start_evaluator shop-pg
    start "the PostgreSQL feeder" "$VAR/log/pgfeeder.log" $PY manage.py feed_demo --stream shop-pg "${FEED_ARGS[@]}"
    PG_NOTE="
  stream 'shop-pg' captured from PostgreSQL (\$KW_DSN_DEMO=$KW_DSN_DEMO), its tables fed the same ops as SQL"
fi

cat <<MSG

  kwmonitor is up: $URL   (web up ${web_up_ms} ms after start)
  log in as:  demo / $DEMO_PASSWORD   (staff: the admin is at ${URL}admin/)
  demo stream 'shop' (id $STREAM_ID) fed at $DEMO_RATE ops/s until stopped (manage.py feed_demo)$PG_NOTE
  logs: $VAR/log/{web,worker,beat,feeder,evaluator-*}.log (earlier runs': .log.1 ...)   Ctrl-C stops everything

MSG
wait "${pids[@]}"
