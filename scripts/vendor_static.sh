#!/usr/bin/env bash
# Reproduce static/vendor/: the charting library (uPlot) from the npm registry at a
# pinned version, with its LICENSE. The tarball's integrity is checked by npm against
# the registry, and the copied files against the digests below, so a re-run either
# gives byte-identical files or fails.
set -euo pipefail

UPLOT_VERSION=1.6.32
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/static/vendor/uplot"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

(cd "$WORK" && npm pack --silent "uplot@$UPLOT_VERSION" >/dev/null && tar xzf "uplot-$UPLOT_VERSION.tgz")
mkdir -p "$DEST"
cp "$WORK/package/dist/uPlot.iife.min.js" "$WORK/package/dist/uPlot.min.css" "$WORK/package/LICENSE" "$DEST/"
echo "$UPLOT_VERSION" > "$DEST/VERSION"

(cd "$DEST" && sha256sum --check --quiet <<'SUMS'
8f989229699b4fe2f1a0432d0e9edc338a8a911e250e2d1b01ecd770a5f5b1bd  LICENSE
19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f  uPlot.iife.min.js
df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04  uPlot.min.css
SUMS
)
echo "static/vendor/uplot: uPlot $UPLOT_VERSION"
