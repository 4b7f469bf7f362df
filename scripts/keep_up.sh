#!/usr/bin/env bash
# keep_up.sh COMMAND...: run COMMAND, and start it again whenever it exits (a crash, a SIGKILL, the OOM killer),
# until this script gets SIGTERM (or SIGINT): then it passes SIGTERM on to COMMAND, waits for it, and exits.
# A command that exits within KEEP_UP_QUICK_SECONDS (10) of its start KEEP_UP_QUICK_LIMIT (3) times in a row is
# not started again (a port in use, a bad setting): this script then exits with its status. `make run` runs the
# web server (daphne) under it; each restart is a line on stderr (the web server's log).
set -uo pipefail
quick_seconds="${KEEP_UP_QUICK_SECONDS:-10}"
quick_limit="${KEEP_UP_QUICK_LIMIT:-3}"
child=""
stopping=no
stop() {
    stopping=yes
    if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; fi
}
trap stop TERM INT
quick=0
while :; do
    started=$SECONDS
    "$@" &
    child=$!
    while :; do  # a trapped signal ends a wait early: wait until the command itself has ended
        wait "$child"
        status=$?
        kill -0 "$child" 2>/dev/null || break
    done
    child=""
    if [ "$stopping" = yes ]; then exit "$status"; fi
    ran=$((SECONDS - started))
    if [ "$ran" -lt "$quick_seconds" ]; then quick=$((quick + 1)); else quick=0; fi
    if [ "$quick" -ge "$quick_limit" ]; then
        echo "keep_up: $1 exited with status $status ${quick} times in a row within ${quick_seconds} s of its start; not starting it again" >&2
        exit "$status"
    fi
    echo "keep_up: $1 exited with status $status after ${ran} s; starting it again" >&2
    sleep 1 &
    wait $!
    if [ "$stopping" = yes ]; then exit "$status"; fi
done
