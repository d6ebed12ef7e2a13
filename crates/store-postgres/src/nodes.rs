//! This store as one node of several on a database (docs/ARCHITECTURE.md, "Several nodes"):
//! its lease (a `nodes` row whose expiry the server's clock judges, renewed every second),
//! the lanes it runs in, and the take-over of a dead node's runs and exchanges. A node's row
//! is its fencing token: a take-over deletes it in the transaction that closes the dead
//! node's work, and every write of a node starts by checking its row (`switchboard_fence`),
//! so once taken over a paused node cannot write for the runs another node closed.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use deadpool_postgres::ClientWrapper;
use switchboard_store::nodes::{LaneClaim, Standing, TakenOver};
use switchboard_store::{NewLine, line};
use switchboard_types::key::SessionKey;

use crate::error::PgError;
use crate::sessions::{exec, row, rows};
use crate::{records, sessions, transcript};

/// How long a node's lease lasts without renewal: a dead node's work is taken over this
/// long after its last renewal (plus up to one `RENEW`).
pub const TTL: Duration = Duration::from_secs(5);

/// How often a node renews its lease and looks for dead ones.
pub const RENEW: Duration = Duration::from_secs(1);

/// The SQLSTATE `switchboard_fence` raises.
pub const FENCED: &str = "SWF01";

/// What the store knows of its own lease.
pub(crate) struct Node {
    pub id: String,
    state: Mutex<Lease>,
    /// The lanes this node holds now; the heartbeat deletes any other lane row of ours (a
    /// release the server did not take).
    held: Mutex<HashSet<String>>,
}

struct Lease {
    /// When the server last confirmed the lease.
    renewed: Instant,
    /// When the lease was last found renewed after a failure (or registered): a node judges
    /// others only after a whole `TTL` of good standing, so a database back from an outage
    /// gives every node time to renew before any is taken over.
    good_since: Instant,
    lost: bool,
}

impl Node {
    pub fn new(id: String) -> Node {
        let now = Instant::now();
        Node {
            id,
            state: Mutex::new(Lease {
                renewed: now,
                good_since: now,
                lost: false,
            }),
            held: Mutex::new(HashSet::new()),
        }
    }

    fn lease(&self) -> std::sync::MutexGuard<'_, Lease> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn standing(&self) -> Standing {
        let lease = self.lease();
        let renewed_ms_ago = lease.renewed.elapsed().as_millis() as u64;
        if lease.lost {
            Standing::Lost
        } else if lease.renewed.elapsed() > TTL {
            Standing::Lapsing { renewed_ms_ago }
        } else {
            Standing::Leased {
                renewed_ms_ago,
                lanes: self.held().len(),
            }
        }
    }

    /// The server said this node's row is gone: another node took it over.
    pub fn lose(&self) {
        let mut lease = self.lease();
        if !lease.lost {
            lease.lost = true;
            tracing::error!(
                node = %self.id,
                "this node lost its lease: another node took over its runs; its writes are refused"
            );
        }
    }

    fn renewed(&self) {
        let mut lease = self.lease();
        if lease.renewed.elapsed() > RENEW * 3 {
            lease.good_since = Instant::now();
        }
        lease.renewed = Instant::now();
    }

    /// Whether this node may judge others dead now (see `Lease::good_since`).
    pub fn may_judge(&self) -> bool {
        let lease = self.lease();
        !lease.lost && lease.renewed.elapsed() < RENEW * 3 && lease.good_since.elapsed() >= TTL
    }

    pub fn hold(&self, key: &str) {
        self.held().insert(key.to_string());
    }

    pub fn let_go(&self, key: &str) {
        self.held().remove(key);
    }

    fn holding(&self) -> Vec<String> {
        self.held().iter().cloned().collect()
    }
}

fn ttl_ms() -> f64 {
    TTL.as_millis() as f64
}

/// Enter this node in `nodes` with a fresh lease.
pub async fn register(c: &ClientWrapper, node: &Node) -> Result<(), PgError> {
    let host = hostname();
    let pid = std::process::id() as i64;
    exec(
        c,
        "INSERT INTO nodes (id, host, pid, expires_at)
         VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')",
        &[&node.id, &host, &pid, &ttl_ms()],
    )
    .await?;
    node.renewed();
    Ok(())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Renew the lease, and drop lane rows of ours this node no longer holds. The lease is
/// renewed while the row exists, even past its expiry: nobody took the node over, so
/// nobody else ran its work. A missing row means someone did: the lease is lost for good.
pub async fn renew(c: &ClientWrapper, node: &Node) -> Result<(), PgError> {
    let found = exec(
        c,
        "UPDATE nodes SET renewed_at = now(),
                          expires_at = now() + $2 * interval '1 millisecond'
         WHERE id = $1",
        &[&node.id, &ttl_ms()],
    )
    .await?;
    if found == 0 {
        node.lose();
        return Ok(());
    }
    node.renewed();
    forget_failures(c).await?;
    let holding = node.holding();
    exec(
        c,
        "DELETE FROM lanes WHERE owner = $1 AND NOT (session_key = ANY($2))",
        &[&node.id, &holding],
    )
    .await?;
    Ok(())
}

/// Leave on a clean exit: the row and lanes go, so nobody waits for the lease to expire.
pub async fn leave(c: &ClientWrapper, id: &str) -> Result<(), PgError> {
    exec(c, "DELETE FROM lanes WHERE owner = $1", &[&id]).await?;
    exec(c, "DELETE FROM nodes WHERE id = $1", &[&id]).await?;
    Ok(())
}

/// Whether engine `owner` still runs: its row is there (not taken over).
pub async fn alive(c: &ClientWrapper, owner: &str) -> Result<bool, PgError> {
    Ok(row(c, "SELECT 1 FROM nodes WHERE id = $1", &[&owner])
        .await?
        .is_some())
}

/// Take `key`'s lane for `owner` when it is free or already ours (a row whose owner has no
/// node row is free: that owner was taken over or never was a node).
pub async fn claim_lane(c: &ClientWrapper, key: &str, owner: &str) -> Result<LaneClaim, PgError> {
    let claimed = row(
        c,
        "INSERT INTO lanes (session_key, owner, epoch) VALUES ($1, $2, 1)
         ON CONFLICT (session_key) DO UPDATE
            SET owner = EXCLUDED.owner, epoch = lanes.epoch + 1, claimed_at = now()
            WHERE lanes.owner = EXCLUDED.owner
               OR NOT EXISTS (SELECT 1 FROM nodes WHERE id = lanes.owner)
         RETURNING epoch",
        &[&key, &owner],
    )
    .await?;
    if claimed.is_some() {
        return Ok(LaneClaim::Held);
    }
    let holder = row(c, "SELECT owner FROM lanes WHERE session_key = $1", &[&key]).await?;
    Ok(match holder {
        Some(r) => LaneClaim::Busy {
            owner: r.try_get(0)?,
        },
        // Released between the two statements: free now, the caller asks again.
        None => LaneClaim::Busy {
            owner: String::new(),
        },
    })
}

pub async fn release_lane(c: &ClientWrapper, key: &str, owner: &str) -> Result<(), PgError> {
    exec(
        c,
        "DELETE FROM lanes WHERE session_key = $1 AND owner = $2",
        &[&key, &owner],
    )
    .await?;
    Ok(())
}

/// Why an engine may be dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doubt {
    /// Its node row is there but its lease ran out.
    Expired,
    /// Its row is there, lease running, but it was on this host and its process is gone.
    Live,
    /// It has open work and no row (taken over half-way, or from before nodes existed).
    NoRow,
}

/// Every engine that may need taking over: each node row (with whether it expired) and the
/// owners of open runs or exchanges that have no row. The caller decides which are dead.
pub async fn candidates(c: &ClientWrapper) -> Result<Vec<(String, Doubt)>, PgError> {
    let known = rows(c, "SELECT id, expires_at < now() FROM nodes", &[]).await?;
    let mut out: Vec<(String, Doubt)> = known
        .iter()
        .map(|r| {
            let expired: bool = r.try_get(1)?;
            Ok((
                r.try_get(0)?,
                if expired { Doubt::Expired } else { Doubt::Live },
            ))
        })
        .collect::<Result<_, PgError>>()?;
    for owner in records::open_owners(c).await? {
        if !out.iter().any(|(o, _)| *o == owner) {
            out.push((owner, Doubt::NoRow));
        }
    }
    Ok(out)
}

/// Take `owner` over, in the caller's transaction: `None` when it turned out alive
/// (renewed meanwhile) or another node took it first. Deleting its row is the claim that
/// makes this take-over the only one, and what fences the owner should it come back.
pub async fn take_over(
    c: &ClientWrapper,
    owner: &str,
    doubt: Doubt,
    now: i64,
) -> Result<Option<TakenOver>, PgError> {
    let claimed = match doubt {
        Doubt::Expired => {
            exec(
                c,
                "DELETE FROM nodes WHERE id = $1 AND expires_at < now()",
                &[&owner],
            )
            .await?
                > 0
        }
        Doubt::Live => exec(c, "DELETE FROM nodes WHERE id = $1", &[&owner]).await? > 0,
        Doubt::NoRow => !alive(c, owner).await?,
    };
    if !claimed {
        return Ok(None);
    }
    let (runs, flows) = close_owner(c, owner, now).await?;
    exec(c, "DELETE FROM lanes WHERE owner = $1", &[&owner]).await?;
    Ok(Some(TakenOver {
        owner: owner.to_string(),
        runs,
        flows,
    }))
}

/// Close `owner`'s running runs (in error, with the interruption line in their sessions)
/// and its exchanges (`interrupted`). Conditional updates: a second caller closes nothing.
pub async fn close_owner(
    c: &ClientWrapper,
    owner: &str,
    now: i64,
) -> Result<(Vec<switchboard_store::RunRow>, Vec<String>), PgError> {
    let runs = records::close_owner_runs(c, owner, now).await?;
    for run in &runs {
        let key = SessionKey::from_canonical(run.session_key.clone());
        if sessions::session_exists(c, &key).await? {
            let message = line::interruption_message(run, now);
            let prepared = line::PreparedLine::new(NewLine::message(message), now);
            transcript::append_prepared(c, &key, &[prepared], now).await?;
        }
    }
    let flows = records::close_owner_flows(c, owner, now).await?;
    // Deliveries it was sending: due again at once (it may have sent them: at least once).
    crate::outbox::release(c, &[owner.to_string()], now).await?;
    Ok((runs, flows))
}

/// Count one failed connect under `peer` in the current window (a fixed window per peer,
/// restarted once it has passed); how long until the window ends when the count is past
/// `max`, else `None`.
pub async fn count_failure(
    c: &ClientWrapper,
    peer: &str,
    max: u32,
    window: Duration,
) -> Result<Option<Duration>, PgError> {
    let window_ms = window.as_millis() as f64;
    let found = row(
        c,
        "INSERT INTO auth_failures AS f (peer, failures, since) VALUES ($1, 1, now())
         ON CONFLICT (peer) DO UPDATE SET
            failures = CASE WHEN f.since < now() - $2 * interval '1 millisecond'
                            THEN 1 ELSE f.failures + 1 END,
            since = CASE WHEN f.since < now() - $2 * interval '1 millisecond'
                         THEN now() ELSE f.since END
         RETURNING failures,
            greatest(0, extract(epoch FROM
                (since + $2 * interval '1 millisecond' - now())) * 1000)::float8",
        &[&peer, &window_ms],
    )
    .await?;
    let Some(found) = found else {
        return Ok(None);
    };
    let failures: i64 = found.try_get(0)?;
    let left_ms: f64 = found.try_get(1)?;
    Ok((failures > i64::from(max)).then(|| Duration::from_millis(left_ms.max(1.0) as u64)))
}

/// Forget failures whose window passed long ago (the heartbeat's upkeep).
pub async fn forget_failures(c: &ClientWrapper) -> Result<(), PgError> {
    exec(
        c,
        "DELETE FROM auth_failures WHERE since < now() - interval '1 day'",
        &[],
    )
    .await?;
    Ok(())
}
