//! `switchboard store check`: what an operator asks of a store before trusting it (after a
//! crash, a disk error, a copy), in one report whichever store answers it. The checks that are
//! plain SQL over the tables both stores share are here once (`SQL_*`); each store runs them
//! and adds its own (SQLite's page check; the leases of several nodes on PostgreSQL).

use std::collections::BTreeMap;

/// Sessions named in a list at most (the rest are counted).
pub const NAMED: usize = 20;

/// Transcript lines whose session id no session has.
pub const SQL_ORPHAN_LINES: &str = "SELECT count(*) FROM transcript t \
     WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.session_id = t.session_id)";

/// Sessions whose transcript is not numbered 0, 1, 2, … without a gap (key order): a line
/// lost or duplicated in between. One pass over the transcript's primary key.
pub const SQL_BROKEN_SEQ: &str = "SELECT s.key FROM sessions s JOIN \
     (SELECT session_id, min(seq) AS lo, max(seq) AS hi, count(*) AS n FROM transcript \
      GROUP BY session_id) t ON t.session_id = s.session_id \
     WHERE t.lo <> 0 OR t.hi <> t.n - 1 ORDER BY s.key";

/// Sessions counted by what `session_counts` keeps them by: kind, archived, reserved key.
pub const SQL_COUNTED: &str = "SELECT kind, archived_at IS NOT NULL, \
     CASE WHEN key IN ('unknown', 'global') THEN key ELSE '' END, count(*) \
     FROM sessions GROUP BY 1, 2, 3";

/// The counters kept.
pub const SQL_KEPT_COUNTS: &str = "SELECT kind, archived, slot, n FROM session_counts";

/// Rows of sessions that are gone: runs, spawn records, outbox rows. Deleting a session
/// keeps its history of runs, so these are reported, not problems.
pub const SQL_GONE_RUNS: &str = "SELECT count(*) FROM runs r \
     WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.key = r.session_key)";
pub const SQL_GONE_SPAWNS: &str = "SELECT count(*) FROM spawns p \
     WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.key = p.child_key)";
pub const SQL_GONE_OUTBOX: &str = "SELECT count(*) FROM outbox o \
     WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.key = o.session_key)";

pub const SQL_SESSIONS: &str = "SELECT count(*) FROM sessions";
pub const SQL_LINES: &str = "SELECT count(*) FROM transcript";
pub const SQL_RUNNING_RUNS: &str = "SELECT count(*) FROM runs WHERE status = 'running'";
pub const SQL_RUNNING_EXCHANGES: &str = "SELECT count(*) FROM flows WHERE status = 'running'";
pub const SQL_RUNNING_SPAWNS: &str = "SELECT count(*) FROM spawns WHERE status = 'running'";

/// What a store says of its own pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Integrity {
    /// Checked: `["ok"]`, or the findings.
    Checked(Vec<String>),
    /// Not checked here, and why (where the server's own tools do it).
    NotChecked(String),
}

/// A `session_counts` row: (kind, archived, slot).
pub type CountKey = (String, bool, String);

/// One node's lease (several nodes on one database).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    pub node: String,
    pub host: String,
    pub pid: i64,
    /// Until the lease runs out, by the database's clock; negative: it ran out that long ago
    /// (the node is dead or cut off, and a running node will take it over).
    pub expires_in_ms: i64,
    /// Sessions whose lane it holds.
    pub lanes: u64,
    /// Runs it has recorded as running.
    pub running: u64,
}

/// The state of the leases: who holds what (empty on a store without leases).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leases {
    pub nodes: Vec<LeaseRow>,
    /// Lane rows whose node is gone: free for the next run that wants them.
    pub stale_lanes: u64,
    /// Runs recorded as running by an owner with no lease: a running node takes them over.
    pub ownerless_runs: u64,
}

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    pub integrity: Integrity,
    pub schema: i64,
    /// The newest schema this build knows.
    pub schema_known: i64,
    pub sessions: u64,
    pub lines: u64,
    /// Transcript lines whose session id no session has (an import cut short leaves them;
    /// the next import of that session discards them).
    pub orphan_lines: u64,
    /// Sessions whose seq is not dense from 0, and the first `NAMED` of them.
    pub broken_seq: u64,
    pub broken_seq_keys: Vec<String>,
    /// `session_counts` rows that disagree with the sessions, in words.
    pub count_drift: Vec<String>,
    /// Runs, spawn records and outbox rows of deleted sessions (kept by design).
    pub gone_runs: u64,
    pub gone_spawns: u64,
    pub gone_outbox: u64,
    /// Recorded as still running: recovered (ended as interrupted) by the next start, unless
    /// a live process is running them now.
    pub running_runs: u64,
    pub running_exchanges: u64,
    pub running_spawns: u64,
    pub leases: Leases,
}

impl CheckReport {
    /// Damage, orphans, gaps, drifted counters or a schema too new: what makes `store
    /// check` exit 1.
    pub fn problems(&self) -> bool {
        let damaged = match &self.integrity {
            Integrity::Checked(found) => found.as_slice() != ["ok"],
            Integrity::NotChecked(_) => false,
        };
        damaged
            || self.orphan_lines > 0
            || self.broken_seq > 0
            || !self.count_drift.is_empty()
            || self.schema > self.schema_known
    }
}

/// The counters that disagree with the sessions counted, in words; rows kept at zero
/// (they stay when the last session of a kind goes) agree with no rows counted.
pub fn count_drift(kept: Vec<(CountKey, i64)>, counted: Vec<(CountKey, i64)>) -> Vec<String> {
    let mut all: BTreeMap<CountKey, (i64, i64)> = BTreeMap::new();
    for (k, n) in kept {
        all.entry(k).or_default().0 += n;
    }
    for (k, n) in counted {
        all.entry(k).or_default().1 += n;
    }
    all.into_iter()
        .filter(|(_, (kept, counted))| kept != counted)
        .map(|((kind, archived, slot), (kept, counted))| {
            let slot = if slot.is_empty() {
                String::new()
            } else {
                format!(", key {slot}")
            };
            let archived = if archived { ", archived" } else { "" };
            format!("{kind}{archived}{slot}: kept {kept}, counted {counted}")
        })
        .collect()
}

/// A count as read (negative never happens; read as 0).
pub fn to_count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_at_zero_agree_and_a_drift_is_named() {
        let k = |kind: &str| (kind.to_string(), false, String::new());
        let drift = count_drift(
            vec![(k("direct"), 2), (k("group"), 0), (k("cron"), 1)],
            vec![(k("direct"), 2), (k("cron"), 3)],
        );
        assert_eq!(drift, vec!["cron: kept 1, counted 3".to_string()]);
    }
}
