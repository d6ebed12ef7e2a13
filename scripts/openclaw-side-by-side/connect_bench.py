"""connect.challenge -> connect -> hello-ok, timed n times on fresh connections (client.py, with its device key)."""
import asyncio, os, statistics, sys, time
sys.path.insert(0, os.environ.get("OC_ROOT", "/work/shared/peers/openclaw"))
from client import Client
async def main(label, url, token, n):
    ts = []
    for i in range(n + 2):
        cl = Client(url, token)
        t0 = time.perf_counter(); await cl.connect(); dt = (time.perf_counter() - t0) * 1000
        await cl.close()
        if i >= 2: ts.append(dt)
    ts.sort(); p95 = ts[min(len(ts) - 1, int(round(0.95 * (len(ts) - 1))))]
    print(f"{label}: n={n} min={ts[0]:.1f} median={statistics.median(ts):.1f} p95={p95:.1f} max={ts[-1]:.1f} ms")
asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 20))
