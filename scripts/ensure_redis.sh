#!/usr/bin/env bash
# Debian's redis-server for the room store's tests (tests/room_fixtures.py) and `make deploy-local REDIS=1`
# (installed with apt-get when run as root). Where it cannot be installed the Redis tests fail under CI (never
# counted as skipped-and-passed) and skip otherwise.
set -u
if [ -x /usr/bin/redis-server ] || command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian's redis-server for the room store's tests..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  exit $?
fi
echo "redis-server is not installed and this is not root: the Redis room tests will fail under CI, skip otherwise."
echo "Install it with: sudo apt-get install redis-server"
exit 0
