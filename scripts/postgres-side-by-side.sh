#!/usr/bin/env bash
# Issue 28: the gateway on PostgreSQL against the same gateway on SQLite, same data, one run.
# The data is the store bench's cached state (100,000 sessions, a 1,000,000-line transcript on
# agent:main:main; build it with `cargo bench --bench store` first), copied into a durable
# PostgreSQL cluster (fsync on, the defaults) made here as the postgres user. Each gateway is a
# release `switchboard serve`; calls are timed by the peer's bench_rpc.py over one WebSocket
# (PY: a python with websockets and cryptography). Prints sessions.list 50, chat.history 100
# of 1M, and chat.send + agent.wait turns for both stores.
# Run: PY=/path/to/python scripts/postgres-side-by-side.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SB:-target/release/switchboard}
PY=${PY:-python3}
PEER=${PEER:-/work/shared/peers/openclaw}
STATE=target/bench-state/store-v2-100k-sessions-1m-lines
N=${N:-50}
[ -f "$STATE/switchboard.db" ] || { echo "run cargo bench --bench store first" >&2; exit 1; }
PORT=55432
source scripts/pg-cluster.sh sb-pg-sbs
# The schema, made by the binary itself.
SWITCHBOARD_STATE_DIR="$WORK/pgstate" SWITCHBOARD_CONFIG="$WORK/config.json5" "$BIN" --store "$URL" sessions list >/dev/null
# The bench state's rows, copied as they are (the columns are the same on both stores).
copy() { # table columns
  "$PY" - "$STATE/switchboard.db" "$1" "$2" <<'PYEOF' | "$PGBIN/psql" -q -h 127.0.0.1 -p $PORT -U postgres switchboard -c "\copy $1 ($2) FROM STDIN WITH (FORMAT csv)"
import sqlite3, sys
db, table, cols = sys.argv[1], sys.argv[2], sys.argv[3]
# Strings quoted, NULL as a bare empty field: PostgreSQL's CSV reads "" as an empty string.
def field(v):
    if v is None:
        return ""
    if isinstance(v, (int, float)):
        return str(v)
    return '"' + str(v).replace('"', '""') + '"'
out = sys.stdout
for row in sqlite3.connect(db).execute(f"SELECT {cols} FROM {table}"):
    out.write(",".join(field(v) for v in row) + "\n")
PYEOF
}
t0=$SECONDS
copy sessions "key,session_id,agent_id,kind,channel,updated_at,label,spawned_by,entry,archived_at,name_key,rev"
copy transcript "session_id,seq,entry_id,type,role,line"
"$PGBIN/psql" -q -h 127.0.0.1 -p $PORT -U postgres switchboard -c "SELECT setval('session_revs', (SELECT max(rev) FROM sessions)); ANALYZE;" >/dev/null
echo "copied into PostgreSQL in $((SECONDS - t0)) s"
# Two gateways: one on PostgreSQL, one on a copy of the SQLite state.
mkdir -p "$WORK/sqlite" && cp "$STATE/switchboard.db" "$WORK/sqlite/"
serve() { # name port extra...
  local name=$1 port=$2; shift 2
  SWITCHBOARD_STATE_DIR="$WORK/$name" SWITCHBOARD_CONFIG="$WORK/config.json5" SWITCHBOARD_GATEWAY_TOKEN=tok \
    "$BIN" "$@" serve --bind 127.0.0.1:$port 2> "$WORK/$name.err" > /dev/null &
  for _ in $(seq 100); do grep -q "listening" "$WORK/$name.err" 2>/dev/null && return; sleep 0.1; done
  cat "$WORK/$name.err" >&2; exit 1
}
serve pgstate 18891 --store "$URL"
serve sqlite 18892
for side in "postgres 18891" "sqlite 18892"; do
  set -- $side
  export OC_PORT=$2 OC_TOKEN=tok
  "$PY" "$PEER/bench_rpc.py" "$1 sessions.list 50 @100k" sessions.list '{"limit": 50}' --n "$N"
  "$PY" "$PEER/bench_rpc.py" "$1 chat.history 100 of 1M" chat.history '{"sessionKey": "agent:main:main", "limit": 100}' --n "$N"
done
# Waited sends: a message and its scripted reply, one after another, on a session each side.
for side in "postgres 18891" "sqlite 18892"; do
  set -- $side
  "$PY" - "$2" "$PEER" "$1" <<'PYEOF'
import asyncio, os, statistics, sys, time, uuid
port, peer, label = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, peer)
from client import Client
async def main():
    cl = Client(f"ws://127.0.0.1:{port}", "tok")
    await cl.connect()
    ts = []
    for i in range(60):
        t0 = time.perf_counter()
        r = await cl.call("chat.send", {"sessionKey": "agent:main:sends", "message": f"m{i}", "idempotencyKey": str(uuid.uuid4())}, timeout=60)
        await cl.call("agent.wait", {"runId": r["runId"], "timeoutMs": 30000}, timeout=60)
        ts.append((time.perf_counter() - t0) * 1000)
    ts = ts[10:]
    print(f"{label} chat.send + agent.wait: median={statistics.median(ts):.1f} ms, {1000/statistics.median(ts):.0f} waited sends/s")
    await cl.close()
asyncio.run(main())
PYEOF
done
