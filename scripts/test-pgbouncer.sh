#!/usr/bin/env bash
# The PgBouncer pass (npm run test:pgbouncer): a part of the PostgreSQL suite that touches every module,
# run with every test file's database reached through a private PgBouncer in transaction pooling (Debian's
# pgbouncer 1.18, test/support/pgbouncer.ts) and the service's setting for it, DATABASE_POOLING=transaction
# (test/support/global-setup.ts and database.ts). Service processes the tests start get the same URL and setting.
#
# DATABASE_URL names the PostgreSQL server (default postgres://postgres@127.0.0.1:5432/test); the databases are
# created and dropped on it directly, as in the PostgreSQL run. Extra arguments go to vitest (a file filter,
# --reporter ...).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/ensure-pgbouncer.sh

# A file or more per module, chosen to touch every module in a few minutes: every route of every module
# (tenant-isolation), deposits paid by slips through verification and review to settlement, withdrawals,
# refunds filled by the sandbox under concurrency (row locks across sessions), webhooks, events, claims,
# disputes, the ledger, the job worker, idempotency (its transaction-scoped advisory locks), checkout,
# beneficiaries, fees, test clocks; deferred writes pipelined with a read and with COMMIT (unit-of-work); the
# service started as its own process with the setting from its environment (ops/start, ops/restart); and the
# setting's own test (platform/pgbouncer).
files=(
  test/platform/pgbouncer.test.ts
  test/platform/unit-of-work.test.ts
  test/platform/carried-reads.test.ts
  test/security/tenant-isolation.test.ts
  test/deposits/deposits.test.ts
  test/settlement/settlement.test.ts
  test/withdrawals/withdrawals.test.ts
  test/refunds/refunds-concurrency.test.ts
  test/webhooks/delivery.test.ts
  test/events/events.test.ts
  test/review/claims.test.ts
  test/disputes/disputes.test.ts
  test/ledger/ledger.test.ts
  test/jobs/jobs.test.ts
  test/idempotency/idempotency.test.ts
  test/checkout/checkout.test.ts
  test/beneficiaries/beneficiaries.test.ts
  test/fees/fees.test.ts
  test/test-clocks/test-clocks.test.ts
  test/ops/start.test.ts
  test/ops/restart.test.ts
)

export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
export PGTEST_PGBOUNCER=1
exec npx vitest run "${files[@]}" "$@"
