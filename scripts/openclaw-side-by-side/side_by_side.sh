#!/usr/bin/env bash
# Issue 12 side by side: one legacy store (10,000 sessions, one 100,000-line transcript),
# served by OpenClaw 2026.5.28 (reads it as is) and by `switchboard serve` (imported),
# both driven by the peer's bench_rpc.py. Output: $OUT.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
trap '[ -f "$WORK/sb.pid" ] && kill -TERM "$(cat "$WORK/sb.pid")" 2>/dev/null; "$OC_ROOT/stop.sh" >/dev/null 2>&1 || true' EXIT
PEER=${OC_PEER:-/work/shared/peers/openclaw}
SB=${SB:-$HERE/../../target/release/switchboard}
WORK=${WORK:-/tmp/sb-side-by-side}
OUT=${OUT:-$WORK/results.txt}
N=${N:-20}
SESSIONS=${SESSIONS:-10000}; MESSAGES=${MESSAGES:-100000}
rm -rf "$WORK"; mkdir -p "$WORK"
cd "$PEER"
source legacy/env-legacy.sh
export OC_STATE="$OC_APP/state-side" OC_PORT=18793 FAKE_LLM_PORT=18904
source "$OC_ROOT/env.sh"
PY="$PEER/.venv/bin/python"
"$OC_ROOT/stop.sh" >/dev/null 2>&1 || true
rm -rf "$OC_STATE"
"$OC_ROOT/start.sh" > "$WORK/legacy-start-1.log"          # creates the state folder and config
"$OC_ROOT/stop.sh" >/dev/null
# 1. the data, generated once, straight into the legacy peer's state folder
$PY gen_legacy_store.py "$OC_STATE/oc" --sessions "$SESSIONS" --messages "$MESSAGES" | tee "$WORK/store.json"
BIG=$(python3 -c "import json;print(json.load(open('$WORK/store.json'))['bigSessionKey'])")
# 2. the same folder imported into a Switchboard state
/usr/bin/time -f "import: %e s, %M KB max RSS" "$SB" import-openclaw "$OC_STATE/oc" --state-dir "$WORK/sb-state" 2>&1 | grep -v "^warning" | tail -3 | tee -a "$OUT"
# 3. both gateways up
"$OC_ROOT/start.sh" | tee "$WORK/legacy-start.log" | tail -1
SB_TOKEN=sb-bench-token-0123456789
SWITCHBOARD_GATEWAY_TOKEN=$SB_TOKEN "$SB" serve --bind 127.0.0.1:18798 --state-dir "$WORK/sb-state" > "$WORK/sb-serve.log" 2>&1 &
echo $! > "$WORK/sb.pid"
for i in $(seq 1 100); do grep -q listening "$WORK/sb-serve.log" && break; sleep 0.1; done
echo "=== side by side $(date -u +%FT%TZ): $SESSIONS sessions, $MESSAGES-line transcript ($BIG); openclaw $(node "$OC_APP/node_modules/openclaw/openclaw.mjs" --version | tail -1); switchboard $("$SB" --version)" | tee -a "$OUT"
bench() {  # label port token
  local label=$1 port=$2 token=$3
  OC_PORT=$port OC_TOKEN=$token $PY bench_rpc.py "$label sessions.list {limit:50}" sessions.list '{"limit":50}' --n "$N" --out "$OUT"
  OC_PORT=$port OC_TOKEN=$token $PY bench_rpc.py "$label chat.history {limit:100} @${MESSAGES} lines" chat.history "{\"sessionKey\":\"$BIG\",\"limit\":100}" --n "$N" --out "$OUT"
  OC_STATE=$WORK/dev-$port $PY "$HERE/connect_bench.py" "$label connect+hello-ok" "ws://127.0.0.1:$port" "$token" "$N" | tee -a "$OUT"
}
mkdir -p "$WORK/dev-18793" "$WORK/dev-18798"
bench "openclaw-2026.5.28" 18793 "$OC_TOKEN"
bench "switchboard" 18798 "$SB_TOKEN"
kill -TERM "$(cat "$WORK/sb.pid")"
"$OC_ROOT/stop.sh"
