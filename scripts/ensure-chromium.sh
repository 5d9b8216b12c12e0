#!/usr/bin/env bash
# Makes sure Debian's chromium is installed for the browser tests (test/checkout/browser.test.ts and the
# back-office console's), which drive it with playwright-core: the tests never download a browser of their
# own. The install itself is scripts/ensure-debian-package.sh. Exit status 0 when chromium is there at the end.
set -euo pipefail
exec "$(dirname "$0")/ensure-debian-package.sh" chromium "${CHROMIUM_PATH:-/usr/bin/chromium}"
