"""What a scattered append costs under two transcript layouts (see BENCHMARKS.md, issue 3).

Not part of the build or the tests: a measurement kept so the numbers can be checked again.
Each round is one transaction, FULL sync, WAL, that appends 2 lines of about 400 bytes to each
of 1,000 different sessions and bumps each session's `updated_at` (as a waited send's primary
commit does). It prints the WAL pages written per append and the time per round, averaged over
the second half of the rounds.

  A  today's layout (DESIGN §3.4): transcript WITHOUT ROWID, primary key (session_id, seq)
  B  an append log: rowid table, plus a unique index on (session number, seq)
  C  the log without any per-session index (a floor, not a usable layout)

Run: python3 docs/experiments/transcript_layout.py A 60   (layout, rounds)
"""
import sqlite3, os, time, uuid, random, sys
layout = sys.argv[1]
path = f"/tmp/transcript-layout-{layout}.db"
for ext in ("", "-wal", "-shm"):
    try: os.remove(path + ext)
    except FileNotFoundError: pass
c = sqlite3.connect(path, isolation_level=None)
c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=FULL"); c.execute("PRAGMA wal_autocheckpoint=0"); c.execute("PRAGMA cache_size=-65536")
N = 1000
if layout == "A":
    c.executescript("""
    CREATE TABLE sessions (key TEXT PRIMARY KEY, session_id TEXT NOT NULL, agent_id TEXT, kind TEXT, channel TEXT, updated_at INTEGER, label TEXT, spawned_by TEXT, entry TEXT);
    CREATE UNIQUE INDEX s1 ON sessions(session_id); CREATE INDEX s2 ON sessions(updated_at DESC); CREATE INDEX s3 ON sessions(kind, updated_at DESC);
    CREATE INDEX s4 ON sessions(agent_id, kind, updated_at DESC); CREATE INDEX s5 ON sessions(agent_id, updated_at DESC);
    CREATE TABLE transcript (session_id TEXT NOT NULL, seq INTEGER NOT NULL, entry_id TEXT, type TEXT, role TEXT, line TEXT, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
    """)
else:
    c.executescript("""
    CREATE TABLE sessions (key TEXT PRIMARY KEY, session_id TEXT NOT NULL, agent_id TEXT, kind TEXT, channel TEXT, updated_at INTEGER, label TEXT, spawned_by TEXT, entry TEXT);
    CREATE UNIQUE INDEX s1 ON sessions(session_id); CREATE INDEX s2 ON sessions(updated_at DESC); CREATE INDEX s3 ON sessions(kind, updated_at DESC);
    CREATE INDEX s4 ON sessions(agent_id, kind, updated_at DESC); CREATE INDEX s5 ON sessions(agent_id, updated_at DESC);
    CREATE TABLE transcript (id INTEGER PRIMARY KEY, sess INTEGER NOT NULL, seq INTEGER NOT NULL, entry_id TEXT, type TEXT, role TEXT, line TEXT);
    """ + ("CREATE UNIQUE INDEX t1 ON transcript(sess, seq);" if layout == "B" else ""))
sids = []
c.execute("BEGIN")
for i in range(2 * N):
    sid = str(uuid.uuid4()); sids.append(sid)
    c.execute("INSERT INTO sessions VALUES (?,?,?,?,?,?,?,?,?)", (f"agent:{'work' if i%2 else 'main'}:s{i//2}", sid, "work" if i%2 else "main", "other", None, 0, None, None, "x"*104))
c.execute("COMMIT")
line = "y" * 400
seqs = {}
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 60
tot_t = 0; tot_frames = 0; measured = 0
for r in range(rounds):
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    t = time.perf_counter()
    c.execute("BEGIN IMMEDIATE")
    now = 1000 + r
    for i in range(N):
        si = 2 * i + 1
        for k in range(2):
            s = seqs.get(si, 0) + 1; seqs[si] = s
            if layout == "A":
                c.execute("INSERT INTO transcript VALUES (?,?,?,?,?,?)", (sids[si], s, str(uuid.uuid4()), "message", "user", line))
            else:
                c.execute("INSERT INTO transcript (sess, seq, entry_id, type, role, line) VALUES (?,?,?,?,?,?)", (si, s, str(uuid.uuid4()), "message", "user", line))
        c.execute("UPDATE sessions SET updated_at = ? WHERE key = ?", (now, f"agent:work:s{i}"))
    c.execute("COMMIT")
    el = time.perf_counter() - t
    frames = os.path.getsize(path + "-wal") // (4096 + 24)
    if r >= rounds // 2:
        tot_t += el; tot_frames += frames; measured += 1
print(layout, f"pages/append {tot_frames/measured/N:.2f}", f"ms/round {1000*tot_t/measured:.1f}", f"(lines so far {sum(seqs.values())})")
