#!/usr/bin/env bash
# Write the local env file ($ENV_FILE, by default var/.env: local settings for `make run` / `make test`) if it
# does not exist: a generated SECRET_KEY and HTTPS off, since the local demo is served over plain http.
# `make run` then adds every other setting it runs with (manage.py save_run_settings).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p var/staticfiles
ENV_FILE="${ENV_FILE:-var/.env}"
if [ ! -f "$ENV_FILE" ]; then
    key=$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')
    mkdir -p "$(dirname "$ENV_FILE")"
    umask 077
    cat > "$ENV_FILE" <<ENV
# Local settings written by scripts/ensure_env.sh and \`make run\`; the real environment overrides them.
SECRET_KEY=$key
HTTPS=off
ENV
    echo "wrote $ENV_FILE (generated SECRET_KEY)"
fi
