#!/usr/bin/env bash
# Makes sure Debian's pgbouncer is installed for the PgBouncer pass (npm run test:pgbouncer, and
# npm run chaos -- --pgbouncer), which start a private pgbouncer process of their own (test/support/pgbouncer.ts)
# in front of the PostgreSQL at 127.0.0.1:5432. The package's own service (the system-wide pgbouncer on port
# 6432) is not needed: nothing here uses it, and the Debian package leaves it stopped on a machine without
# systemd. The install itself is scripts/ensure-debian-package.sh. Exit status 0 when pgbouncer is there at the end.
set -euo pipefail
exec "$(dirname "$0")/ensure-debian-package.sh" pgbouncer "${PGBOUNCER_PATH:-/usr/sbin/pgbouncer}"
