#!/usr/bin/env bash
# Make Debian's Chromium available for the real-browser tests. Playwright's own browser
# download cannot work offline, so the tests drive /usr/bin/chromium.
set -u
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian's chromium for the browser tests..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  exit $?
fi
echo "Chromium is not installed and this is not root: the real-browser tests will be skipped."
echo "Install it with: sudo apt-get install chromium"
exit 0
