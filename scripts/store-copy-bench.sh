#!/usr/bin/env bash
# Issue 28 item 4: `switchboard store copy` of a big state, SQLite -> PostgreSQL and back.
# Seeds a SQLite state of $SESSIONS sessions with $LINES message lines each (default 10,000 x
# 100 = 1,000,000 lines, about 300 bytes a line) from one real session made by the binary,
# starts a throwaway PostgreSQL cluster as the postgres user (durable: fsync on, the
# defaults), and times the copy there and back with the release binary (`cargo build
# --release`). Prints each copy's wall time, the verification's verdict and peak RSS.
# Run: scripts/store-copy-bench.sh   (SESSIONS=… LINES=… to change the size)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${SB:-target/release/switchboard}")
SESSIONS=${SESSIONS:-10000}
LINES=${LINES:-100}
PORT=${PORT:-55433}
source scripts/pg-cluster.sh sb-copy-bench
"$BIN" --config "$WORK/config.json5" --state-dir "$WORK/src" inject agent:main:template "hello" --quiet >/dev/null
python3 - "$WORK/src/switchboard.db" "$SESSIONS" "$LINES" <<'PYEOF'
import sqlite3, sys, uuid
db, sessions, lines = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = sqlite3.connect(db)
cols = "session_id, agent_id, kind, channel, updated_at, label, spawned_by, entry, archived_at, name_key"
t = c.execute(f"SELECT {cols} FROM sessions WHERE key = 'agent:main:template'").fetchone()
for i in range(sessions):
    sid = str(uuid.uuid4())
    key = f"agent:main:s{i:06d}"
    entry = t[7].replace(t[0], sid)
    c.execute(f"INSERT INTO sessions (key, {cols}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
              (key, sid, t[1], t[2], t[3], t[4] + i, t[5], t[6], entry, t[8], key))
    rows = [(sid, 0, sid, "session", None, '{"type":"session","version":3,"id":"%s"}' % sid)]
    for s in range(1, lines + 1):
        role = "user" if s % 2 else "assistant"
        text = f"message {s} of session {i}: " + "lorem ipsum dolor sit amet " * 8
        rows.append((sid, s, f"e{s}", "message", role,
            '{"type":"message","id":"e%d","parentId":null,"timestamp":"2026-11-28T04:00:00.000Z",'
            '"message":{"role":"%s","content":[{"type":"text","text":"%s"}]}}' % (s, role, text)))
    c.executemany("INSERT INTO transcript (session_id, seq, entry_id, type, role, line) VALUES (?,?,?,?,?,?)", rows)
c.commit()
print(f"seeded {sessions} sessions, {sessions * (lines + 1)} lines:",
      c.execute("SELECT page_count * page_size / 1e6 FROM pragma_page_count, pragma_page_size").fetchone()[0], "MB")
PYEOF
run() { # label from to
  local t0 rc
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$WORK/rss" "$BIN" store copy --from "$2" --to "$3" --json > "$WORK/report.json" || rc=$?
  printf '%s: %.1f s, peak RSS %d MB, ok=%s\n' "$1" "$(echo "$(date +%s.%N) - $t0" | bc)" \
    "$(( $(cat "$WORK/rss") / 1024 ))" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ok"])' "$WORK/report.json")"
}
run "SQLite -> PostgreSQL" "$WORK/src" "$URL"
run "PostgreSQL -> SQLite" "$URL" "$WORK/back"
run "rerun (everything there: skipped, verified again)" "$WORK/src" "$URL"
