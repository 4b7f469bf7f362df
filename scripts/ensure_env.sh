#!/usr/bin/env bash
# Write var/.env (local settings for `make run` / `make test`) if it does not exist:
# a generated SECRET_KEY and HTTPS off, since the local demo is served over plain http.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p var/staticfiles
if [ ! -f var/.env ]; then
    key=$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')
    umask 077
    cat > var/.env <<ENV
# Local settings written by scripts/ensure_env.sh; the real environment overrides them.
SECRET_KEY=$key
HTTPS=off
ENV
    echo "wrote var/.env (generated SECRET_KEY)"
fi
