#!/usr/bin/env bash
# Ours alone at the issue's sizes: 100,000 sessions and a 1,000,000-line transcript.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PEER=${OC_PEER:-/work/shared/peers/openclaw}
SB=${SB:-$HERE/../../target/release/switchboard}
WORK=${WORK_BIG:-/tmp/sb-side-by-side-big}; OUT=${OUT:-/tmp/sb-side-by-side/results.txt}; N=${N:-20}
rm -rf "$WORK"; mkdir -p "$WORK" "$(dirname "$OUT")"
python3 $PEER/gen_legacy_store.py "$WORK/store" --sessions 100000 --messages 1000000 | tee "$WORK/store.json"
BIG=$(python3 -c "import json;print(json.load(open('$WORK/store.json'))['bigSessionKey'])")
/usr/bin/time -f "import (100k/1M): %e s, %M KB max RSS" "$SB" import-openclaw "$WORK/store" --state-dir "$WORK/sb-state" 2>&1 | grep -v "^warning" | tail -2 | tee -a "$OUT"
SWITCHBOARD_GATEWAY_TOKEN=sb-bench-token-0123456789 "$SB" serve --bind 127.0.0.1:18799 --state-dir "$WORK/sb-state" > "$WORK/serve.log" 2>&1 &
PID=$!; trap 'kill -TERM $PID' EXIT
for i in $(seq 1 100); do grep -q listening "$WORK/serve.log" && break; sleep 0.1; done
echo "=== switchboard alone $(date -u +%FT%TZ): 100000 sessions, 1000000-line transcript ($BIG)" | tee -a "$OUT"
cd $PEER; export OC_STATE=$WORK/dev OC_PORT=18799 OC_TOKEN=sb-bench-token-0123456789; mkdir -p $OC_STATE
.venv/bin/python bench_rpc.py "switchboard sessions.list {limit:50} @100k" sessions.list '{"limit":50}' --n $N --out "$OUT"
.venv/bin/python bench_rpc.py "switchboard chat.history {limit:100} @1M lines" chat.history "{\"sessionKey\":\"$BIG\",\"limit\":100}" --n $N --out "$OUT"
.venv/bin/python bench_rpc.py "switchboard chat.history {limit:100,offset:500000} @1M lines" chat.history "{\"sessionKey\":\"$BIG\",\"limit\":100,\"offset\":500000}" --n $N --out "$OUT"
.venv/bin/python "$HERE/connect_bench.py" "switchboard connect+hello-ok @100k" "ws://127.0.0.1:18799" "$OC_TOKEN" $N | tee -a "$OUT"
