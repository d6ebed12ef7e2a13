# Sourced by the PostgreSQL benchmark scripts: a throwaway cluster made as the postgres user
# in a temporary folder (durable: fsync on, the defaults), on 127.0.0.1:$PORT, with an empty
# database `switchboard` at $URL and a scripted agent's config at $WORK/config.json5; stopped
# and removed on exit (with any background jobs). Set PORT and the folder's prefix first:
#   PORT=55432; source scripts/pg-cluster.sh sb-bench
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | tail -1)
WORK=$(mktemp -d "/tmp/${1:-sb-pg}.XXXX")
chown postgres:postgres "$WORK"
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
runuser -u postgres -- "$PGBIN/initdb" -A trust -U postgres -E UTF8 --locale C -D "$WORK/data" >/dev/null
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/pg.log" -w \
  -o "-c listen_addresses=127.0.0.1 -c port=$PORT -k $WORK -c shared_buffers=256MB" start >/dev/null
URL="postgres://postgres@127.0.0.1:$PORT/switchboard"
"$PGBIN/createdb" -h 127.0.0.1 -p $PORT -U postgres switchboard
echo '{ agents: { list: [ { id: "main", default: true, model: "scripted", script: [ { reply: "ok" } ] } ] } }' > "$WORK/config.json5"
