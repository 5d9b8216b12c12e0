#!/usr/bin/env bash
# Sends one signed merchant request using only bash, openssl and curl, to show the signing scheme
# needs nothing from this project. Usage:
#   scripts/signed-request.sh [METHOD] [PATH?QUERY] [BODY] [IDEMPOTENCY_KEY]
# Credentials come from $CREDENTIALS (default ./data/sandbox-credentials.json).
set -euo pipefail
method="${1:-GET}"
target="${2:-/v1/pay/banks}"
body="${3:-}"
idempotency_key="${4:-}"
credentials="${CREDENTIALS:-./data/sandbox-credentials.json}"
api_version="${PG_VERSION:-2026-08-01}"

field() { node -e "process.stdout.write(JSON.parse(require('fs').readFileSync(process.argv[1],'utf8'))[process.argv[2]])" "$credentials" "$1"; }
base_url="$(field base_url)"
api_key="$(field api_key)"
signing_secret="$(field signing_secret)"

path="${target%%\?*}"
query=""
if [[ "$target" == *\?* ]]; then query="${target#*\?}"; fi
# Sort the raw name=value parts of the query in byte order (LC_ALL=C), as sent, without decoding.
sorted_query="$(printf '%s' "$query" | tr '&' '\n' | sed '/^$/d' | LC_ALL=C sort | paste -sd '&' -)"
timestamp="$(date +%s)"
nonce="$(openssl rand -hex 16)"
body_hash="$(printf '%s' "$body" | openssl dgst -sha256 -r | cut -d' ' -f1)"
canonical="$(printf 'v1\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n' "$timestamp" "$nonce" "$method" "$path" "$sorted_query" "$body_hash" "$idempotency_key" "$api_version")"
# $(...) drops the final newline; printf adds it back so the ninth line is terminated too.
signature="$(printf '%s\n' "$canonical" | openssl dgst -sha256 -hmac "$signing_secret" -r | cut -d' ' -f1)"

args=(-sS -i -X "$method" "$base_url$target"
  -H "Authorization: Bearer $api_key"
  -H "PG-Timestamp: $timestamp"
  -H "PG-Nonce: $nonce"
  -H "PG-Version: $api_version"
  -H "PG-Signature: v1=$signature")
if [[ -n "$idempotency_key" ]]; then args+=(-H "Idempotency-Key: $idempotency_key"); fi
if [[ -n "$body" ]]; then args+=(-H "Content-Type: application/json" --data-binary "$body"); fi
curl "${args[@]}"
echo
