#!/usr/bin/env bash
# Our serve's CPU per call (from /proc: utime+stime over N calls), with the peer's own client,
# on the side-by-side store (run side_by_side_25.sh once first; it leaves the imported state in
# $WORK/sb-state). Steadier than latency on a shared machine: other load adds little CPU.
#   scripts/openclaw-side-by-side/cpu_per_call.sh            # list and history, 1,000 calls each
#   N=500 SB=/tmp/other-build/switchboard scripts/openclaw-side-by-side/cpu_per_call.sh
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PEER=${OC_PEER:-/work/shared/peers/openclaw}
SB=${SB:-$HERE/../../target/release/switchboard}
WORK=${WORK:-/tmp/sb-side-by-side-25}
N=${N:-1000}; PORT=18799; TOKEN=sb-bench-token-0123456789
[ -d "$WORK/sb-state" ] || { echo "no $WORK/sb-state: run side_by_side_25.sh first" >&2; exit 1; }
cat > "$WORK/cpu-config.json5" <<C
{ agents: { list: [ { id: "main", default: true, model: "fake/fake-model" } ] },
  models: { providers: { fake: { baseUrl: "http://127.0.0.1:18901/v1" } } } }
C
SWITCHBOARD_CONFIG="$WORK/cpu-config.json5" SWITCHBOARD_GATEWAY_TOKEN=$TOKEN \
  "$SB" serve --bind 127.0.0.1:$PORT --state-dir "$WORK/sb-state" > "$WORK/cpu-serve.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null' EXIT
for _ in $(seq 1 100); do grep -q listening "$WORK/cpu-serve.log" && break; sleep 0.1; done
kill -0 $PID 2>/dev/null || { cat "$WORK/cpu-serve.log" >&2; exit 1; }
cpu() { awk '{print $14+$15}' "/proc/$PID/stat"; }   # clock ticks (1/100 s)
measure() {  # label method params
  local a b
  a=$(cpu)
  (cd "$PEER" && OC_PORT=$PORT OC_TOKEN=$TOKEN .venv/bin/python bench_rpc.py "$1" "$2" "$3" --n "$N" | cut -c1-90)
  b=$(cpu)
  echo "$1: serve CPU $(echo "scale=3; ($b - $a) * 10 / $N" | bc) ms/call; RSS $(grep VmRSS /proc/$PID/status | awk '{print $2}') KB"
}
measure "sessions.list {limit:50}" sessions.list '{"limit":50}'
measure "chat.history {limit:100}" chat.history '{"sessionKey":"agent:main:bench-hist","limit":100}'
