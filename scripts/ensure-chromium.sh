#!/usr/bin/env bash
# Makes sure Debian's chromium is installed for the browser tests (test/checkout/browser.test.ts), which
# drive it with playwright-core: the tests never download a browser of their own. When the binary is
# missing, it is installed from the Debian package servers with apt-get (the only servers these machines
# reach). The package lists are refreshed only when they do not know the package or when the install
# fails with the lists at hand (a stale list names files the mirror no longer has).
#
# Exit status 0 when chromium is there at the end, non-zero otherwise; the test set-up decides what a
# failure means (it fails the browser tests when CI=true, and skips them elsewhere).
set -euo pipefail

chromium="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$chromium" ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  # Installing a system package needs root; sudo is used only when it can run without a password prompt.
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    echo "ensure-chromium: $chromium is missing and installing it needs root (run: apt-get install -y --no-install-recommends chromium)" >&2
    exit 1
  fi
else
  as_root=()
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: $chromium is missing and this system has no apt-get" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Another apt or dpkg run (a second test process, an engineer's install) holds the lock for a while: wait
# for it rather than failing at once.
apt_options=(-o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)

install_chromium() {
  "${as_root[@]}" apt-get "${apt_options[@]}" install -y --no-install-recommends chromium
}

update_lists() {
  "${as_root[@]}" apt-get "${apt_options[@]}" update
}

echo "ensure-chromium: installing Debian's chromium (apt-get install -y --no-install-recommends chromium)" >&2
if ! apt-cache show chromium >/dev/null 2>&1; then
  update_lists
  install_chromium
elif ! install_chromium; then
  update_lists
  install_chromium
fi

if [ ! -x "$chromium" ]; then
  echo "ensure-chromium: the chromium package installed, but $chromium is still missing" >&2
  exit 1
fi
echo "ensure-chromium: $("$chromium" --version 2>/dev/null || echo chromium) is installed" >&2
