#!/usr/bin/env bash
# Makes sure Debian's pgbouncer is installed for the PgBouncer pass (npm run test:pgbouncer, and
# npm run chaos -- --pgbouncer), which start a private pgbouncer process of their own (test/support/pgbouncer.ts)
# in front of the PostgreSQL at 127.0.0.1:5432. When the binary is missing, it is installed from the Debian
# package servers with apt-get (the only servers these machines reach). The package lists are refreshed only
# when they do not know the package or when the install fails with the lists at hand (a stale list names
# files the mirror no longer has).
#
# The package's own service (the system-wide pgbouncer on port 6432) is not needed: nothing here uses it, and
# the Debian package leaves it stopped on a machine without systemd.
#
# Exit status 0 when pgbouncer is there at the end, non-zero otherwise.
set -euo pipefail

pgbouncer="${PGBOUNCER_PATH:-/usr/sbin/pgbouncer}"
if [ -x "$pgbouncer" ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  # Installing a system package needs root; sudo is used only when it can run without a password prompt.
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    echo "ensure-pgbouncer: $pgbouncer is missing and installing it needs root (run: apt-get install -y --no-install-recommends pgbouncer)" >&2
    exit 1
  fi
else
  as_root=()
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-pgbouncer: $pgbouncer is missing and this system has no apt-get" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Another apt or dpkg run (a second test process, an engineer's install) holds the lock for a while: wait
# for it rather than failing at once.
apt_options=(-o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)

install_pgbouncer() {
  "${as_root[@]}" apt-get "${apt_options[@]}" install -y --no-install-recommends pgbouncer
}

update_lists() {
  "${as_root[@]}" apt-get "${apt_options[@]}" update
}

echo "ensure-pgbouncer: installing Debian's pgbouncer (apt-get install -y --no-install-recommends pgbouncer)" >&2
if ! apt-cache show pgbouncer >/dev/null 2>&1; then
  update_lists
  install_pgbouncer
elif ! install_pgbouncer; then
  update_lists
  install_pgbouncer
fi

if [ ! -x "$pgbouncer" ]; then
  echo "ensure-pgbouncer: the pgbouncer package installed, but $pgbouncer is still missing" >&2
  exit 1
fi
echo "ensure-pgbouncer: $("$pgbouncer" --version 2>/dev/null | head -n 1 || echo pgbouncer) is installed" >&2
