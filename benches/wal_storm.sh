#!/usr/bin/env bash
# WAL size under a storm of short-lived writers while a reader keeps the database open
# (BENCHMARKS.md, "WAL under load").
# Usage: benches/wal_storm.sh [BINARY] [SECONDS] [WRITERS] [PAD_BYTES]
# Prints the peak size of switchboard.db-wal (sampled every 20 ms), the commands run and
# failed, and the session count read from a copy of switchboard.db alone.
set -u
BIN=${1:-target/release/switchboard}
SECS=${2:-40}
WRITERS=${3:-4}
PAD=$(head -c "${4:-0}" /dev/zero | tr '\0' x)
WORK=$(mktemp -d)
STATE=$WORK/state
CONFIG=$WORK/config.json5
echo '{ agents: { list: [ { id: "main", default: true, model: "scripted", script: [ { reply: "got: {{text}}" } ] } ] } }' >"$CONFIG"
"$BIN" --state-dir "$STATE" --config "$CONFIG" inject agent:main:main hello >/dev/null 2>&1
# With CONSOLE=1 the console itself (in a detached tmux session) is open throughout as well.
if [ "${CONSOLE:-0}" = 1 ]; then
  tmux new-session -d -s "walstorm$$" -x 120 -y 40 "$BIN --state-dir $STATE --config $CONFIG"
fi
# The reader: one connection open throughout, a short read every 50 ms (a console's ticks).
python3 - "$STATE/switchboard.db" "$WORK/stop" <<'PY' &
import os, sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
while not os.path.exists(sys.argv[2]):
    c.execute("SELECT count(*) FROM sessions").fetchall()
    time.sleep(0.05)
PY
READER=$!
END=$((SECONDS + SECS))
for w in $(seq 1 "$WRITERS"); do
  (
    i=0; ok=0; fail=0
    while [ $SECONDS -lt $END ]; do
      i=$((i + 1))
      if "$BIN" --state-dir "$STATE" --config "$CONFIG" inject "agent:main:w$w-$((i % 50))" "message $i from writer $w $PAD" >/dev/null 2>"$WORK/stderr-$w"; then
        ok=$((ok + 1)); else fail=$((fail + 1)); cat "$WORK/stderr-$w" >>"$WORK/errors"; fi
    done
    echo "$ok $fail" >"$WORK/writer-$w"
  ) &
done
PEAK=0
while [ $SECONDS -lt $END ]; do
  SIZE=$(stat -c %s "$STATE/switchboard.db-wal" 2>/dev/null || echo 0)
  [ "$SIZE" -gt "$PEAK" ] && PEAK=$SIZE
  sleep 0.02
done
wait $(jobs -p | grep -v "^$READER$") 2>/dev/null
SIZE=$(stat -c %s "$STATE/switchboard.db-wal" 2>/dev/null || echo 0)
[ "$SIZE" -gt "$PEAK" ] && PEAK=$SIZE
# Copied while the reader is still open: its close (the last one) would checkpoint too.
cp "$STATE/switchboard.db" "$WORK/copy.db"
touch "$WORK/stop"; wait "$READER"
[ "${CONSOLE:-0}" = 1 ] && tmux kill-session -t "walstorm$$"
OK=0; FAIL=0
for f in "$WORK"/writer-*; do read -r a b <"$f"; OK=$((OK + a)); FAIL=$((FAIL + b)); done
IN_COPY=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from sessions').fetchone()[0])" "$WORK/copy.db")
echo "peak WAL: $PEAK bytes; final WAL: $SIZE bytes; db: $(stat -c %s "$STATE/switchboard.db") bytes"
echo "commands: $OK ok, $FAIL failed; sessions in a copy of switchboard.db alone: $IN_COPY"
[ -s "$WORK/errors" ] && { echo "first errors:"; sort "$WORK/errors" | uniq -c | head -5; }
rm -rf "$WORK"
