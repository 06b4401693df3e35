#!/usr/bin/env bash
# Install the web UI's npm packages exactly as the root package-lock.json pins them. The repo
# root is an npm workspaces root with frontend/ as its workspace, so npm hoists the packages
# into <repo>/node_modules (binaries in <repo>/node_modules/.bin).
#   frontend/npm-install.sh             install (npm ci)
#   frontend/npm-install.sh --if-stale  only when node_modules is missing or older than the lock
# `npm ci` first; npm 11 writes lock files without other platforms' optional binaries (rollup,
# esbuild) and then refuses them in `npm ci` (npm/cli#4828 and friends), so fall back to `npm
# install --no-save`, which installs the same pinned versions and leaves the lock file untouched.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [ "${1:-}" = "--if-stale" ]; then
  if [ -f node_modules/.package-lock.json ] && [ ! package-lock.json -nt node_modules/.package-lock.json ]; then
    exit 0
  fi
  echo "npm-install: installing the pinned npm packages (npm ci)" >&2
fi

# npm ci empties only the root node_modules: a frontend/node_modules left from before the
# workspace (a full install) would shadow the hoisted packages. npm recreates what it needs
# there; tsc's and Vite's caches in it are rebuilt.
rm -rf frontend/node_modules
npm ci --no-audit --no-fund --loglevel=error 2>/dev/null \
  || npm install --no-save --no-audit --no-fund --loglevel=error
