#!/usr/bin/env bash
# Make sure the Debian packages of scripts/system-packages.txt needed for USE (run or test) are installed.
# As root, installs the missing ones with apt-get. Otherwise names the one command that does it and fails,
# so `make run` and `make test` either find everything or say exactly what to run.
set -euo pipefail
use="${1:-test}"
here="$(cd "$(dirname "$0")" && pwd)"
case "$use" in run|test) ;; *) echo "usage: $0 run|test" >&2; exit 2 ;; esac

wanted=()
while read -r package uses; do
    case "$package" in ''|'#'*) continue ;; esac
    uses="${uses%%#*}"
    [[ " $uses " == *" $use "* ]] && wanted+=("$package")
done < "$here/system-packages.txt"

missing=()
for package in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
    echo "missing system packages for make $use: ${missing[*]}" >&2
    echo "install them with:  sudo $here/system_packages.sh $use" >&2
    exit 2
fi
echo "installing system packages for make $use: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
