"""One streamed chat completion against an OpenAI-compatible server: time to the first token,
tokens per second after it (one SSE chunk with content = one token, as llama.cpp streams), and
the server's own usage figures when it sends them."""
import json
import sys
import time
import urllib.request

base = sys.argv[1].rstrip("/")
body = {
    "model": "smollm2",
    "stream": True,
    "stream_options": {"include_usage": True},
    "max_tokens": 200,
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Tell me a short story about two robots who become friends."},
    ],
}
req = urllib.request.Request(
    base + "/chat/completions",
    data=json.dumps(body).encode(),
    headers={"content-type": "application/json"},
)
start = time.monotonic()
first = None
chunks = 0
usage = None
text = []
with urllib.request.urlopen(req, timeout=120) as resp:
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        ev = json.loads(data)
        if ev.get("usage"):
            usage = ev["usage"]
        for choice in ev.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                if first is None:
                    first = time.monotonic()
                chunks += 1
                text.append(piece)
end = time.monotonic()
gen = end - (first or end)
print(f"time to first token: {((first or end) - start) * 1000:.0f} ms")
print(f"streamed chunks: {chunks} in {gen:.2f} s -> {chunks / gen if gen > 0 else 0:.1f} tokens/s")
if usage:
    print(f"server usage: {usage}")
print("text:", "".join(text)[:300].replace("\n", " "))
