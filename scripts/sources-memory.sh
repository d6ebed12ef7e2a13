#!/usr/bin/env bash
# Issue 27: the console's memory with one source against three (100,000 sessions in all).
# Uses the states `cargo bench --bench sources` caches (run it first) and the release binary
# it builds. Each console runs in tmux at 120x40, is left 8 s to load and draw, then its
# VmRSS and VmHWM are read from /proc.
# Run: scripts/sources-memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SB:-target/release/switchboard}
HOME_STATE=target/bench-state/sources-v1-home-33334
TEAM_STATE=target/bench-state/sources-v1-team-33333
[ -f "$HOME_STATE/ready" ] && [ -f "$TEAM_STATE/ready" ] || { echo "run cargo bench --bench sources first" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'tmux -L sbmem kill-server 2>/dev/null || true; kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
TOKEN=mem-token-0123456789
echo '{ agents: { list: [ { id: "main", default: true, model: "scripted", script: [ { reply: "ok" } ] } ] } }' > "$WORK/config.json5"
for s in home team lab ops; do mkdir -p "$WORK/$s"; done
cp "$HOME_STATE/switchboard.db" "$WORK/home/"
cp "$TEAM_STATE/switchboard.db" "$WORK/team/"
cp "$TEAM_STATE/switchboard.db" "$WORK/lab/"
cp "$TEAM_STATE/switchboard.db" "$WORK/ops/"
serve() { # name -> prints host:port
  SWITCHBOARD_STATE_DIR="$WORK/$1" SWITCHBOARD_CONFIG="$WORK/config.json5" SWITCHBOARD_GATEWAY_TOKEN=$TOKEN \
    "$BIN" serve --bind 127.0.0.1:0 2> "$WORK/$1.err" > /dev/null &
  for _ in $(seq 100); do
    addr=$(grep -o 'listening on ws://[0-9.:]*' "$WORK/$1.err" | sed 's/listening on ws:\/\///' || true)
    [ -n "$addr" ] && { echo "$addr"; return; }
    sleep 0.1
  done
  echo "serve $1 did not start" >&2; exit 1
}
TEAM=$(serve team); LAB=$(serve lab); OPS=$(serve ops)
measure() { # label, command...
  local label=$1; shift
  tmux -L sbmem -f /dev/null new-session -d -s m -x 120 -y 40 "env SWITCHBOARD_CONFIG=$WORK/config.json5 SWITCHBOARD_TOKEN_TEAM=$TOKEN SWITCHBOARD_TOKEN_LAB=$TOKEN SWITCHBOARD_TOKEN_OPS=$TOKEN SWITCHBOARD_GATEWAY_TOKEN=$TOKEN $*; sleep 30"
  sleep 8
  local pid; pid=$(pgrep -f -n "^$BIN --state-dir" || true)
  printf '%-40s %s\n' "$label" "$(grep -E 'VmRSS|VmHWM' /proc/$pid/status | tr -s ' \n' ' ')"
  tmux -L sbmem kill-server
  sleep 1
}
measure "local folder alone (33,334)" "$BIN" --state-dir "$WORK/home"
measure "one gateway (serve, 33,333)" "$BIN" --state-dir "$WORK/home" --connect "ws://$TEAM"
measure "three sources: local + 2 serve (100,000)" "$BIN" --state-dir "$WORK/home" --connect "team=ws://$TEAM" --connect "lab=ws://$LAB"
measure "three gateways, --no-local (99,999)" "$BIN" --state-dir "$WORK/home" --no-local --connect "team=ws://$TEAM" --connect "lab=ws://$LAB" --connect "ops=ws://$OPS"
