#!/usr/bin/env bash
# Issue 25 side by side: OpenClaw 2026.9.6 and `switchboard serve` up at once on the same data
# (10,000 sessions and one 100,000-line transcript written into 2026.9.6's SQLite store by the
# peer's bench_populate.py, then imported into ours with `switchboard import-openclaw`), both
# driven by the peer's own clients (bench_rpc.py, bench_turn.py) against the peer's fake LLM.
# Pairs run back to back (OpenClaw, then ours) so both see the same machine load. Output: $OUT.
# PERF=1 also records `perf record` on our serve while bench_rpc.py loops (perf-*.data in $WORK;
# read with `perf report -i F --children --sort sym --stdio -g none`).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PEER=${OC_PEER:-/work/shared/peers/openclaw}
SB=${SB:-$HERE/../../target/release/switchboard}
WORK=${WORK:-/tmp/sb-side-by-side-25}
OUT=${OUT:-$WORK/results.txt}
N=${N:-50}; TURNS=${TURNS:-20}
SESSIONS=${SESSIONS:-10000}; MESSAGES=${MESSAGES:-100000}
SB_PORT=18798; SB_TOKEN=sb-bench-token-0123456789
# REUSE=1 keeps the populated OpenClaw store of an earlier run; PREP_ONLY=1 stops after it.
[ "${REUSE:-0}" = 1 ] || rm -rf "$WORK"
mkdir -p "$WORK"
cd "$PEER"
export OC_STATE="$WORK/oc-state" OC_PORT=18790 FAKE_LLM_PORT=18901
source ./env.sh
PY="$PEER/.venv/bin/python"
DB="$OC_STATE/oc/agents/main/agent/openclaw-agent.sqlite"
trap '[ -f "$WORK/sb.pid" ] && kill -TERM "$(cat "$WORK/sb.pid")" 2>/dev/null; ./stop.sh >/dev/null 2>&1 || true' EXIT
# 1. the data: a template session and a history session made by the gateway itself, then cloned
if [ ! -f "$WORK/oc-populated" ]; then
./start.sh | tail -1
$PY client.py --quiet call sessions.create '{"key":"agent:main:bench-template","agentId":"main","label":"bench-template"}' >/dev/null 2>&1
$PY client.py --quiet send agent:main:bench-template "SAY template reply" --wait 30 >/dev/null 2>&1
$PY client.py --quiet send agent:main:bench-hist "SAY hist reply" --wait 30 >/dev/null 2>&1
./stop.sh >/dev/null
$PY bench_populate.py sessions "$DB" agent:main:bench-template "$SESSIONS"
$PY bench_populate.py transcript "$DB" agent:main:bench-hist "$MESSAGES"
touch "$WORK/oc-populated"
fi
[ "${PREP_ONLY:-0}" = 1 ] && exit 0
# 2. the same store imported into a Switchboard state
rm -rf "$WORK/sb-state"
/usr/bin/time -f "import: %e s, %M KB max RSS" "$SB" import-openclaw "$OC_STATE/oc" --state-dir "$WORK/sb-state" 2>&1 | tail -3 | tee -a "$OUT"
# 3. both gateways up; ours runs agent main on the same fake LLM OpenClaw uses
./start.sh | tail -1
cat > "$WORK/sb-config.json5" <<EOF
{ agents: { list: [ { id: "main", default: true, model: "fake/fake-model" } ] },
  models: { providers: { fake: { baseUrl: "http://127.0.0.1:$FAKE_LLM_PORT/v1" } } } }
EOF
SWITCHBOARD_CONFIG="$WORK/sb-config.json5" SWITCHBOARD_GATEWAY_TOKEN=$SB_TOKEN \
  "$SB" serve --bind 127.0.0.1:$SB_PORT --state-dir "$WORK/sb-state" > "$WORK/sb-serve.log" 2>&1 &
echo $! > "$WORK/sb.pid"
for i in $(seq 1 100); do grep -q listening "$WORK/sb-serve.log" && break; sleep 0.1; done
echo "=== issue 25 side by side $(date -u +%FT%TZ): $SESSIONS sessions, $MESSAGES-line transcript; openclaw $($OC --version | tail -1); switchboard $("$SB" --version); load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT"
rpc() {  # label method params
  OC_PORT=$OC_PORT OC_TOKEN=$OC_TOKEN $PY bench_rpc.py "openclaw-2026.9.6 $1" "$2" "$3" --n "$N" --out "$OUT"
  OC_PORT=$SB_PORT OC_TOKEN=$SB_TOKEN $PY bench_rpc.py "switchboard $1" "$2" "$3" --n "$N" --out "$OUT"
}
HIST='{"sessionKey":"agent:main:bench-hist","limit":100}'
for round in 1 2; do
  rpc "health (client floor)" health '{}'
  rpc "status" status '{}'
  rpc "sessions.list {limit:50} @$SESSIONS" sessions.list '{"limit":50}'
  rpc "chat.history {limit:100} @$MESSAGES lines" chat.history "$HIST"
done
# the client's own share: req -> answer text, then its json.loads, on each gateway
split() {  # label method params
  OC_PORT=$OC_PORT OC_TOKEN=$OC_TOKEN $PY "$HERE/rpc_split.py" "openclaw-2026.9.6 $1" "$2" "$3" --out "$OUT"
  OC_PORT=$SB_PORT OC_TOKEN=$SB_TOKEN $PY "$HERE/rpc_split.py" "switchboard $1" "$2" "$3" --out "$OUT"
}
split "health split" health '{}'
split "sessions.list {limit:50} split" sessions.list '{"limit":50}'
split "chat.history {limit:100} split" chat.history "$HIST"
for gw in openclaw switchboard; do
  if [ $gw = openclaw ]; then P=$OC_PORT T=$OC_TOKEN; else P=$SB_PORT T=$SB_TOKEN; fi
  echo -n "$gw: " | tee -a "$OUT"
  OC_PORT=$P OC_TOKEN=$T $PY bench_turn.py "agent:main:turnbench-$gw" "$TURNS" "$OUT"
done
if [ "${PERF:-0}" = 1 ]; then  # where our time goes: perf on serve while the client loops
  for m in sessions.list chat.history; do
    if [ $m = sessions.list ]; then p='{"limit":50}'; else p=$HIST; fi
    # DWARF call graphs: the release build has no frame pointers (build it with
    # CARGO_PROFILE_RELEASE_DEBUG=line-tables-only CARGO_PROFILE_RELEASE_STRIP=false).
    perf record -F 800 --call-graph dwarf,16384 -p "$(cat "$WORK/sb.pid")" -o "$WORK/perf-$m.data" 2>/dev/null &
    PERF_PID=$!; sleep 0.5
    OC_PORT=$SB_PORT OC_TOKEN=$SB_TOKEN $PY bench_rpc.py "switchboard $m under perf" $m "$p" --n 1500 --out "$OUT"
    kill -INT $PERF_PID; wait $PERF_PID || true
  done
fi
