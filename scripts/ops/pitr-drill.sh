#!/usr/bin/env bash
# A point-in-time recovery drill on a private PostgreSQL cluster, end to end, the way an operator restores:
#
#   1. a cluster with WAL archiving (archive_mode, archive_command copying each segment to an archive directory),
#   2. the service migrated and started on it (npm run migrate, then npm start with DATABASE_URL),
#   3. a base backup (pg_basebackup, WAL fetched from the archive at restore time),
#   4. deposits of batch "kept" through the signed API, the recovery target time, then deposits of batch "lost"
#      (the mistake one restores to before),
#   5. the backup restored into a new data directory with restore_command and recovery_target_time, promoted,
#   6. the service started on the restored cluster, which must find every deposit of "kept" by id and answer 404 for each of "lost".
#
# Usage: scripts/ops/pitr-drill.sh [--keep]   (npm run ops:pitr-drill). Exit 0 when the restore is exact.
# Nothing touches the shared server at 127.0.0.1:5432: both clusters are throwaway ones on free ports in a
# temporary directory, removed at the end unless --keep.
set -euo pipefail
cd "$(dirname "$0")/../.."

keep=false
if [[ "${1:-}" == "--keep" ]]; then keep=true; fi
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | head -n 1)"
if [[ -z "$bin" ]]; then echo "pitr-drill: PostgreSQL server binaries not found (Debian package postgresql)" >&2; exit 2; fi

work="$(mktemp -d /tmp/pitr-drill-XXXXXX)"
# initdb and pg_ctl refuse to run as root; as root, the clusters belong to the postgres user.
as_postgres=()
if [[ "$(id -u)" == "0" ]]; then as_postgres=(runuser -u postgres --); chown postgres:postgres "$work"; fi
chmod 700 "$work"
service_pid=""

log() { printf 'pitr-drill: %s\n' "$*"; }
free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{process.stdout.write(String(s.address().port));s.close()})"; }
pg() { "${as_postgres[@]}" "$bin/$1" "${@:2}"; }
sql() { psql -X -q -t -A -h 127.0.0.1 -p "$1" -U postgres -d "$2" -c "$3"; }

cleanup() {
  if [[ -n "$service_pid" ]]; then kill "$service_pid" 2>/dev/null || true; wait "$service_pid" 2>/dev/null || true; fi
  for data in "$work/primary" "$work/restored"; do
    if [[ -f "$data/postmaster.pid" ]]; then pg pg_ctl -D "$data" -m immediate -w stop >/dev/null 2>&1 || true; fi
  done
  if [[ "$keep" == "true" ]]; then log "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

start_cluster() { # data directory, port, log file
  pg pg_ctl -D "$1" -l "$3" -w -t 120 -o "-p $2 -k $work -c listen_addresses=127.0.0.1" start >/dev/null
}

start_service() { # database url, port
  DATABASE_URL="$1" PORT="$2" HOST=127.0.0.1 DATA_DIR="$work/service" LOG_LEVEL=warn \
    node --import tsx src/main.ts >>"$work/service.log" 2>&1 &
  service_pid=$!
  for _ in $(seq 1 300); do
    if curl -fsS "http://127.0.0.1:$2/readyz" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  log "the service did not become ready; its log:"; tail -n 40 "$work/service.log" >&2; exit 1
}

stop_service() { kill "$service_pid"; wait "$service_pid" 2>/dev/null || true; service_pid=""; }

create_deposits() { # batch name, count, first amount in satang (batches differ, or a sender's open deposit is a duplicate)
  for i in $(seq 1 "$2"); do
    local body="{\"amount_minor\":$(($3 + i * 100)),\"currency\":\"THB\",\"merchant_reference\":\"drill-$1-$i\",\"end_user_ref\":\"drill-user-$i\",\"sender\":{\"bank_code\":\"002\",\"account_number\":\"77000000$((10 + i))\",\"account_name_th\":\"สมชาย ใจดี\",\"account_name_en\":\"Somchai Jaidee\"},\"client\":{\"device_fingerprint\":\"drill-$1-$i\",\"ip\":\"203.0.113.9\",\"user_agent\":\"pitr-drill\"}}"
    local answer
    answer="$(CREDENTIALS="$work/service/sandbox-credentials.json" scripts/signed-request.sh POST /v1/pay/deposits "$body" "drill-$1-$i")"
    if ! grep -Eq '^HTTP/1.1 20[12] ' <<<"$answer"; then log "deposit drill-$1-$i was not created:"; echo "$answer" >&2; exit 1; fi
    grep -o '"id":"dep_[0-9A-Z]*"' <<<"$answer" | head -n 1 | cut -d'"' -f4 >>"$work/$1.ids"
  done
}

count_found() { # batch name: how many of its deposits the service finds by id (200, not 404)
  local found=0 id answer
  while read -r id; do
    answer="$(CREDENTIALS="$work/service/sandbox-credentials.json" scripts/signed-request.sh GET "/v1/pay/deposits/$id")"
    if grep -q '^HTTP/1.1 200 ' <<<"$answer"; then found=$((found + 1)); elif ! grep -q '^HTTP/1.1 404 ' <<<"$answer"; then echo "$answer" >&2; fi
  done <"$work/$1.ids"
  echo "$found"
}

primary_port="$(free_port)"
mkdir -p "$work/archive" && chown "$(stat -c %U "$work")" "$work/archive"
log "primary cluster on 127.0.0.1:$primary_port with WAL archiving to $work/archive"
pg initdb -D "$work/primary" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
cat >>"$work/primary/postgresql.conf" <<EOF
wal_level = replica
archive_mode = on
archive_command = 'test ! -f $work/archive/%f && cp %p $work/archive/%f'
archive_timeout = 60
EOF
start_cluster "$work/primary" "$primary_port" "$work/primary.log"
sql "$primary_port" postgres "CREATE DATABASE payments" >/dev/null
primary_url="postgres://postgres@127.0.0.1:$primary_port/payments"

log "npm run migrate, then the service on the primary"
DATABASE_URL="$primary_url" DATA_DIR="$work/service" node --import tsx src/migrate.ts >>"$work/service.log" 2>&1
service_port="$(free_port)"
start_service "$primary_url" "$service_port"

log "base backup (pg_basebackup, plain format, WAL from the archive at restore time)"
pg pg_basebackup -h 127.0.0.1 -p "$primary_port" -U postgres -D "$work/base" -X none -c fast

kept=5
lost=5
create_deposits kept "$kept" 10000
sleep 1
target_time="$(sql "$primary_port" payments "SELECT clock_timestamp()")"
sleep 1
create_deposits lost "$lost" 20000
log "recovery target: $target_time, between $kept deposits kept and $lost deposits lost"
stop_service
# The segment holding the last writes is archived now rather than at archive_timeout.
sql "$primary_port" payments "SELECT pg_switch_wal()" >/dev/null
sql "$primary_port" payments "SELECT pg_switch_wal()" >/dev/null
for _ in $(seq 1 100); do
  if [[ "$(sql "$primary_port" postgres "SELECT last_failed_wal IS NULL AND archived_count > 0 FROM pg_stat_archiver")" == "t" ]]; then break; fi
  sleep 0.1
done
pg pg_ctl -D "$work/primary" -m fast -w stop >/dev/null

log "restore: the base backup into a new directory, restore_command from the archive, recovery_target_time"
cp -a "$work/base" "$work/restored"
cat >>"$work/restored/postgresql.conf" <<EOF
archive_mode = off
restore_command = 'cp $work/archive/%f %p'
recovery_target_time = '$target_time'
recovery_target_action = 'promote'
EOF
"${as_postgres[@]}" touch "$work/restored/recovery.signal"
restored_port="$(free_port)"
start_cluster "$work/restored" "$restored_port" "$work/restored.log"
for _ in $(seq 1 300); do
  if [[ "$(sql "$restored_port" postgres "SELECT NOT pg_is_in_recovery()" 2>/dev/null || true)" == "t" ]]; then break; fi
  sleep 0.2
done
restored_url="postgres://postgres@127.0.0.1:$restored_port/payments"

log "the service on the restored cluster"
start_service "$restored_url" "$service_port"
# The same port as before, so the base URL in the credentials file (written at the first start only) still holds.
found_kept="$(count_found kept)"
found_lost="$(count_found lost)"
stop_service
grep -m1 "recovery stopping before" "$work/restored.log" | sed 's/^/pitr-drill: server: /' || true
log "after the restore: $found_kept of $kept kept deposits found, $found_lost of $lost lost deposits found"
if [[ "$found_kept" == "$kept" && "$found_lost" == "0" ]]; then log "PASS: restored to the target time exactly"; exit 0; fi
log "FAIL: the restored database is not the database at the target time"
exit 1
