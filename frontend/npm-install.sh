#!/usr/bin/env bash
# Install frontend/node_modules exactly as package-lock.json pins it. `npm ci` first; npm 11
# writes lock files without other platforms' optional binaries (rollup, esbuild) and then
# refuses them in `npm ci` (npm/cli#4828 and friends), so fall back to `npm install
# --no-save`, which installs the same pinned versions and leaves the lock file untouched.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
npm ci --no-audit --no-fund --loglevel=error 2>/dev/null \
  || npm install --no-save --no-audit --no-fund --loglevel=error
