#!/usr/bin/env bash
# Debian's nginx for tests/test_deploy.py and `make deploy-local` (installed with apt-get when run as root).
# Where it cannot be installed the deploy test fails under CI (it is never counted as skipped-and-passed).
set -u
if [ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian's nginx for the deployment test..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends nginx >/dev/null
  exit $?
fi
echo "nginx is not installed and this is not root: tests/test_deploy.py will fail under CI, skip otherwise."
echo "Install it with: sudo apt-get install nginx"
exit 0
