#!/usr/bin/env bash
# rotate_logs.sh DIR [KEEP]: keep the logs of the previous runs. Each DIR/NAME.log becomes NAME.log.1,
# NAME.log.1 becomes NAME.log.2, and so on up to KEEP (default 5) previous runs; older ones are deleted,
# those of a component that no longer writes a log included. `make run` does this before it starts anything.
set -euo pipefail
dir=$1
keep=${2:-5}
[[ $keep =~ ^[0-9]+$ ]] || { echo "rotate_logs.sh: KEEP must be a number of runs, not '$keep'" >&2; exit 2; }
shopt -s nullglob
declare -A bases=()
for file in "$dir"/*.log "$dir"/*.log.[0-9]*; do
    bases["${file%.log*}.log"]=1
done
for base in "${!bases[@]}"; do
    for file in "$base".[0-9]*; do
        number=${file##*.}
        if [[ $number =~ ^[0-9]+$ ]] && (( number >= keep )); then rm -f -- "$file"; fi
    done
    for (( i = keep - 1; i >= 1; i-- )); do
        if [ -e "$base.$i" ]; then mv -- "$base.$i" "$base.$(( i + 1 ))"; fi
    done
    if [ -e "$base" ]; then
        if (( keep > 0 )); then mv -- "$base" "$base.1"; else rm -f -- "$base"; fi
    fi
done
