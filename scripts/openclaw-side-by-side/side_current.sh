#!/usr/bin/env bash
# OpenClaw 2026.9.6 (SQLite store) at the same sizes: 10,000 sessions and a 100,000-line
# transcript written with the peer's bench_populate.py (its store cannot read the legacy files).
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PEER=${OC_PEER:-/work/shared/peers/openclaw}
WORK=${WORK:-/tmp/sb-side-by-side}
OUT=${OUT:-$WORK/results.txt}
N=${N:-20}
mkdir -p "$WORK"; cd "$PEER"
export OC_STATE="$PEER/state-side-cur" OC_PORT=18790 FAKE_LLM_PORT=18901
source ./env.sh
PY="$PEER/.venv/bin/python"
DB="$OC_STATE/oc/agents/main/agent/openclaw-agent.sqlite"
trap './stop.sh >/dev/null 2>&1' EXIT
./stop.sh >/dev/null 2>&1; rm -rf "$OC_STATE"
./start.sh | tail -1
$PY client.py --quiet call sessions.create '{"key":"agent:main:bench-template","agentId":"main","label":"bench-template"}' >/dev/null 2>&1
$PY client.py --quiet send agent:main:bench-template "SAY template reply" --wait 30 >/dev/null 2>&1
$PY client.py --quiet send agent:main:bench-hist "SAY hist reply" --wait 30 >/dev/null 2>&1
./stop.sh
$PY bench_populate.py sessions "$DB" agent:main:bench-template 10000
$PY bench_populate.py transcript "$DB" agent:main:bench-hist 100000
./start.sh | tail -1
echo "=== openclaw 2026.9.6 $(date -u +%FT%TZ): 10000 sessions + 100000-line transcript (bench_populate)" | tee -a "$OUT"
$PY bench_rpc.py "openclaw-2026.9.6 COLD sessions.list {limit:50}" sessions.list '{"limit":50}' --n 1 --warmup 0 --out "$OUT"
$PY bench_rpc.py "openclaw-2026.9.6 COLD chat.history {limit:100}" chat.history '{"sessionKey":"agent:main:bench-hist","limit":100}' --n 1 --warmup 0 --out "$OUT"
$PY bench_rpc.py "openclaw-2026.9.6 sessions.list {limit:50}" sessions.list '{"limit":50}' --n "$N" --out "$OUT"
$PY bench_rpc.py "openclaw-2026.9.6 chat.history {limit:100} @100000 lines" chat.history '{"sessionKey":"agent:main:bench-hist","limit":100}' --n "$N" --out "$OUT"
$PY "$HERE/connect_bench.py" "openclaw-2026.9.6 connect+hello-ok" "ws://127.0.0.1:$OC_PORT" "$OC_TOKEN" "$N" | tee -a "$OUT"
