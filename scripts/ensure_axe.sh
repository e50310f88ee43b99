#!/usr/bin/env bash
# axe-core (pinned in package.json / package-lock.json) for the accessibility browser tests.
# Installed from the npm registry with `npm ci` when node_modules/axe-core is missing; otherwise nothing to do.
set -u
cd "$(dirname "$0")/.."
if [ -f node_modules/axe-core/axe.min.js ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is not installed: the accessibility browser tests will be skipped."
  echo "Install it with: sudo apt-get install npm"
  exit 0
fi
echo "Installing axe-core for the accessibility browser tests (npm ci)..."
npm ci --no-audit --no-fund --loglevel=error
