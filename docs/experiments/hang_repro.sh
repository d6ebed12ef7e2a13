#!/bin/bash
# Issue 10 item 3: reproduce the parked `inject` by hand, outside the test suite.
#   docs/experiments/hang_repro.sh [N per loop] [loops of each kind]
# Runs loops of `inject agent:main:telegram:group:ops "ask work X"` and
# `inject agent:main:main "delegate X"` side by side on one state folder, with the two-agents
# example plus `delayMs` (tests/stress_concurrent.rs uses the same config). A process alive
# after LIMIT seconds is reported, its threads dumped with gdb (if present), then killed.
# Measured on the 2-core VM: before the fix 6 of 800 processes hung (2 loops); after it
# 0 of 1,200 (4 loops), the only failures being "database is locked" at open (item 5).
set -u
BIN=${BIN:-target/debug/switchboard}
N=${1:-300}; K=${2:-1}; LIMIT=${LIMIT:-20}
WORK=$(mktemp -d); STATE=$WORK/state; CFG=$WORK/config.json5
sed -n '/^const STRESS_CONFIG: &str = r#"/,/^}"#;/p' tests/stress_concurrent.rs \
  | sed '1s/.*/{/; $s/.*/}/' > "$CFG"
loop() { # which
  local err="$WORK/err.$1.$BASHPID"
  for i in $(seq 1 "$N"); do
    if [ "$1" = ask ]; then
      "$BIN" --state-dir "$STATE" --config "$CFG" inject agent:main:telegram:group:ops "ask work X$i" --channel telegram >/dev/null 2>"$err" &
    else
      "$BIN" --state-dir "$STATE" --config "$CFG" inject agent:main:main "delegate X$i" >/dev/null 2>"$err" &
    fi
    pid=$!; t=0
    while kill -0 "$pid" 2>/dev/null; do
      sleep 0.1; t=$((t + 1))
      if [ "$t" -ge $((LIMIT * 10)) ]; then
        echo "HANG $1 i=$i pid=$pid" | tee -a "$WORK/hangs"
        command -v gdb >/dev/null && gdb -p "$pid" -batch -ex 'thread apply all bt' >"$WORK/bt.$pid" 2>&1
        kill -9 "$pid"; break
      fi
    done
    wait "$pid" || echo "rc=$? $1 i=$i: $(tail -1 "$err")" >>"$WORK/fails"
  done
}
for _ in $(seq 1 "$K"); do loop ask & loop del & done
wait
echo "hangs: $(cat "$WORK/hangs" 2>/dev/null | wc -l); failures: $(cat "$WORK/fails" 2>/dev/null | wc -l); details in $WORK"
