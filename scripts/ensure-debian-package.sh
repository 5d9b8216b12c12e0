#!/usr/bin/env bash
# Makes sure a program from one of Debian's packages is installed, for the tests and runs that need one
# (scripts/ensure-chromium.sh, scripts/ensure-pgbouncer.sh). Usage:
#   scripts/ensure-debian-package.sh <package> <path of the program it installs>
# When the program is missing, the package is installed from the Debian package servers with apt-get (the only
# servers these machines reach). The package lists are refreshed only when they do not know the package or when
# the install fails with the lists at hand (a stale list names files the mirror no longer has).
#
# Exit status 0 when the program is there at the end, non-zero otherwise; the caller decides what a failure
# means (the test set-up fails the tests that need it when CI=true, and skips them elsewhere).
set -euo pipefail

package="$1"
program="$2"
name="ensure-$package"
if [ -x "$program" ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  # Installing a system package needs root; sudo is used only when it can run without a password prompt.
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    echo "$name: $program is missing and installing it needs root (run: apt-get install -y --no-install-recommends $package)" >&2
    exit 1
  fi
else
  as_root=()
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "$name: $program is missing and this system has no apt-get" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Another apt or dpkg run (a second test process, an engineer's install) holds the lock for a while: wait
# for it rather than failing at once.
apt_options=(-o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)

install_package() {
  "${as_root[@]}" apt-get "${apt_options[@]}" install -y --no-install-recommends "$package"
}

update_lists() {
  "${as_root[@]}" apt-get "${apt_options[@]}" update
}

echo "$name: installing Debian's $package (apt-get install -y --no-install-recommends $package)" >&2
if ! apt-cache show "$package" >/dev/null 2>&1; then
  update_lists
  install_package
elif ! install_package; then
  update_lists
  install_package
fi

if [ ! -x "$program" ]; then
  echo "$name: the $package package installed, but $program is still missing" >&2
  exit 1
fi
echo "$name: $("$program" --version 2>/dev/null | head -n 1 || echo "$package") is installed" >&2
