#!/usr/bin/env bash
# Builds the web console (web/, TypeScript + Vite) into web/dist, which the gpuplane build then
# compiles into the binary (scripts/embed_console.py). Skips the build when nothing under web/
# (nor the lock file) is newer than the last one. Needs `npm ci` (scripts/setup.sh) first.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[ -f web/vite.config.ts ] || exit 0  # no console in this tree
VITE=node_modules/.bin/vite
if [ ! -x "$VITE" ]; then
  echo "console: $VITE is missing; run scripts/setup.sh (npm ci)" >&2
  exit 1
fi
STAMP=web/dist/index.html
if [ -f "$STAMP" ] && [ -z "$(find web package-lock.json -path web/dist -prune -o -newer "$STAMP" -type f -print -quit)" ]; then
  exit 0
fi
echo "console: type-checking web/ and building it into web/dist" >&2
node_modules/.bin/tsc --noEmit -p web >&2  # vite strips types without checking them
"$VITE" build --config web/vite.config.ts --logLevel warn >&2
