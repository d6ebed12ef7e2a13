//! The tables `store copy` moves, with the columns both stores hold (the PostgreSQL schema
//! mirrors SQLite's; columns a store computes itself, a session's `rev` and a run's
//! insertion number, are left to the destination), the order each is paged in, and the SQL
//! that reads and writes them, spelled for either store's placeholders.

use super::Cell;

/// A column's type in both stores: SQLite's INTEGER / TEXT, PostgreSQL's BIGINT / TEXT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Int,
    Text,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub ty: ColumnType,
    pub nullable: bool,
}

const fn int(name: &'static str) -> Column {
    Column {
        name,
        ty: ColumnType::Int,
        nullable: false,
    }
}
const fn int_opt(name: &'static str) -> Column {
    Column {
        name,
        ty: ColumnType::Int,
        nullable: true,
    }
}
const fn text(name: &'static str) -> Column {
    Column {
        name,
        ty: ColumnType::Text,
        nullable: false,
    }
}
const fn text_opt(name: &'static str) -> Column {
    Column {
        name,
        ty: ColumnType::Text,
        nullable: true,
    }
}

/// Every table of the engine's state. `meta` is not among them (each store keeps its own:
/// its id, the key scheme its kinds were computed under), nor `session_counts` (kept by
/// triggers on each side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    Sessions,
    Transcript,
    Runs,
    Flows,
    Spawns,
    Outbox,
    ImportMarks,
    IdempotencyKeys,
    Pairings,
}

/// Which rows of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// What the engine keeps: every row, but for transcript lines only those of a session
    /// (lines no session owns are left-overs of a cut-short import) and for idempotency keys
    /// only those unexpired at `now`.
    Kept { now: i64 },
    /// The rows one session owns: its lines (by session id), runs, outbox rows, spawn record
    /// (as the child) and import mark (by key).
    Session { key: String, session_id: String },
    /// Runs, outbox rows, spawn records and import marks of sessions that are gone (deleting
    /// a session keeps its history of runs); they move on their own.
    Orphans,
}

/// Placeholders as each store spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    fn placeholder(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}"),
        }
    }
}

impl Table {
    pub const ALL: [Table; 9] = [
        Table::Sessions,
        Table::Transcript,
        Table::Runs,
        Table::Flows,
        Table::Spawns,
        Table::Outbox,
        Table::ImportMarks,
        Table::IdempotencyKeys,
        Table::Pairings,
    ];

    /// The table's name in both stores.
    pub fn name(self) -> &'static str {
        match self {
            Table::Sessions => "sessions",
            Table::Transcript => "transcript",
            Table::Runs => "runs",
            Table::Flows => "flows",
            Table::Spawns => "spawns",
            Table::Outbox => "outbox",
            Table::ImportMarks => "import_marks",
            Table::IdempotencyKeys => "idempotency_keys",
            Table::Pairings => "pairings",
        }
    }

    /// What a report calls its rows.
    pub fn noun(self) -> &'static str {
        match self {
            Table::Sessions => "sessions",
            Table::Transcript => "transcriptLines",
            Table::Runs => "runs",
            Table::Flows => "exchanges",
            Table::Spawns => "spawns",
            Table::Outbox => "outbox",
            Table::ImportMarks => "importMarks",
            Table::IdempotencyKeys => "idempotencyKeys",
            Table::Pairings => "pairings",
        }
    }

    /// Its rows in words.
    pub fn words(self) -> &'static str {
        match self {
            Table::Sessions => "sessions",
            Table::Transcript => "transcript lines",
            Table::Runs => "runs",
            Table::Flows => "exchanges",
            Table::Spawns => "sub-agent records",
            Table::Outbox => "outbox rows",
            Table::ImportMarks => "import marks",
            Table::IdempotencyKeys => "idempotency keys",
            Table::Pairings => "pairings",
        }
    }

    pub fn columns(self) -> &'static [Column] {
        const SESSIONS: &[Column] = &[
            text("key"),
            text("session_id"),
            text("agent_id"),
            text("kind"),
            text_opt("channel"),
            int("updated_at"),
            text_opt("label"),
            text_opt("spawned_by"),
            text("entry"),
            int_opt("archived_at"),
            text("name_key"),
        ];
        const TRANSCRIPT: &[Column] = &[
            text("session_id"),
            int("seq"),
            text("entry_id"),
            text("type"),
            text_opt("role"),
            text("line"),
        ];
        const RUNS: &[Column] = &[
            text("run_id"),
            text("session_key"),
            text("agent_id"),
            text("step"),
            int("round"),
            text_opt("flow_id"),
            text("status"),
            text("owner"),
            int("started_at"),
            int_opt("ended_at"),
            text_opt("error"),
            text_opt("reply"),
            int_opt("tokens_in"),
            int_opt("tokens_out"),
        ];
        const FLOWS: &[Column] = &[
            text("flow_id"),
            text("chain_id"),
            text("requester"),
            text("target"),
            text("message"),
            text("run_id"),
            text("status"),
            text_opt("ended_reason"),
            text("owner"),
            int("started_at"),
            int_opt("ended_at"),
            text("kind"),
            text_opt("detail"),
            text_opt("announce"),
            text_opt("announce_text"),
            text_opt("announce_channel"),
            text_opt("announce_to"),
            text_opt("announce_detail"),
        ];
        const SPAWNS: &[Column] = &[
            text("child_key"),
            text("requester"),
            text("run_id"),
            text("agent_id"),
            text("task"),
            text_opt("label"),
            text("cleanup"),
            text("mode"),
            text("status"),
            text_opt("outcome"),
            text_opt("error"),
            int("started_at"),
            int_opt("ended_at"),
            text_opt("announce"),
            text_opt("announce_state"),
            int_opt("announced_at"),
            int_opt("archive_at"),
            int_opt("archived_at"),
        ];
        const OUTBOX: &[Column] = &[
            int("id"),
            int("created_at"),
            text("session_key"),
            text("kind"),
            text("channel"),
            text("recipient"),
            text_opt("account_id"),
            text_opt("thread_id"),
            text("text"),
            text("status"),
            text_opt("run_id"),
            text_opt("flow_id"),
            int("attempt"),
            int_opt("next_at"),
            text_opt("claimed_by"),
            int_opt("claim_until"),
            text_opt("message_id"),
            text_opt("last_error"),
            int_opt("updated_at"),
        ];
        const MARKS: &[Column] = &[
            text("session_key"),
            text("session_id"),
            text("source_file"),
            int("source_size"),
            int("source_mtime_ns"),
            text("source_entry_hash"),
            text("entry_hash"),
            int("last_seq"),
        ];
        const KEYS: &[Column] = &[
            text("key"),
            text("session_key"),
            text("message_hash"),
            text_opt("run_id"),
            int("seq"),
            text_opt("command_reply"),
            int("created_at"),
        ];
        const PAIRINGS: &[Column] = &[
            text("channel"),
            text("sender"),
            text_opt("display_name"),
            text("code"),
            int("requested_at"),
            int("expires_at"),
            int_opt("approved_at"),
        ];
        match self {
            Table::Sessions => SESSIONS,
            Table::Transcript => TRANSCRIPT,
            Table::Runs => RUNS,
            Table::Flows => FLOWS,
            Table::Spawns => SPAWNS,
            Table::Outbox => OUTBOX,
            Table::ImportMarks => MARKS,
            Table::IdempotencyKeys => KEYS,
            Table::Pairings => PAIRINGS,
        }
    }

    /// The columns the table is paged by (unique together, so "after the last row" is
    /// exact). A session's runs go oldest first, which keeps their insertion order on the
    /// other side; pages of orphans walk the primary key.
    pub fn order(self, scope: &Scope) -> &'static [&'static str] {
        match (self, scope) {
            (Table::Sessions, _) => &["key"],
            (Table::Transcript, _) => &["seq"],
            (Table::Runs, Scope::Session { .. }) => &["started_at", "run_id"],
            (Table::Runs, _) => &["run_id"],
            (Table::Flows, _) => &["flow_id"],
            (Table::Spawns, _) => &["child_key"],
            (Table::Outbox, _) => &["id"],
            (Table::ImportMarks, _) => &["session_key"],
            (Table::IdempotencyKeys, _) => &["key"],
            (Table::Pairings, _) => &["channel", "sender"],
        }
    }

    /// The cells of `row` that `order` names, for the next page's `after`.
    pub fn cursor(self, scope: &Scope, row: &[Cell]) -> Vec<Cell> {
        let cols = self.columns();
        self.order(scope)
            .iter()
            .filter_map(|name| cols.iter().position(|c| c.name == *name))
            .filter_map(|i| row.get(i).cloned())
            .collect()
    }

    /// The column naming the session a row belongs to, by key (`None`: by session id, or
    /// none).
    fn owner_key(self) -> Option<&'static str> {
        match self {
            Table::Runs | Table::Outbox | Table::ImportMarks => Some("session_key"),
            Table::Spawns => Some("child_key"),
            _ => None,
        }
    }

    /// The WHERE clause of `scope` (without the cursor) and its parameters.
    fn filter(self, scope: &Scope, dialect: Dialect) -> (String, Vec<Cell>) {
        let t = self.name();
        match scope {
            Scope::Kept { now } => match self {
                Table::Transcript => (
                    "EXISTS (SELECT 1 FROM sessions s WHERE s.session_id = transcript.session_id)"
                        .into(),
                    vec![],
                ),
                Table::IdempotencyKeys => {
                    let since = now.saturating_sub(crate::idempotency::TTL.as_millis() as i64);
                    (
                        format!("created_at > {}", dialect.placeholder(1)),
                        vec![Cell::Int(since)],
                    )
                }
                _ => ("1 = 1".into(), vec![]),
            },
            Scope::Session { key, session_id } => match (self, self.owner_key()) {
                (Table::Transcript, _) => (
                    format!("session_id = {}", dialect.placeholder(1)),
                    vec![Cell::Text(session_id.clone())],
                ),
                (Table::Sessions, _) => (
                    format!("key = {}", dialect.placeholder(1)),
                    vec![Cell::Text(key.clone())],
                ),
                (_, Some(col)) => (
                    format!("{col} = {}", dialect.placeholder(1)),
                    vec![Cell::Text(key.clone())],
                ),
                // Shared tables belong to no one session.
                (_, None) => ("1 = 0".into(), vec![]),
            },
            Scope::Orphans => match self.owner_key() {
                Some(col) => (
                    format!("NOT EXISTS (SELECT 1 FROM sessions s WHERE s.key = {t}.{col})"),
                    vec![],
                ),
                None => ("1 = 0".into(), vec![]),
            },
        }
    }

    /// `SELECT` of a page: at most `limit` rows after `after`, in `order`.
    pub fn select_page(
        self,
        scope: &Scope,
        after: &[Cell],
        limit: usize,
        dialect: Dialect,
    ) -> (String, Vec<Cell>) {
        let (mut filter, mut params) = self.filter(scope, dialect);
        let order = self.order(scope);
        if !after.is_empty() {
            let marks: Vec<String> = (0..after.len())
                .map(|i| dialect.placeholder(params.len() + 1 + i))
                .collect();
            filter = format!(
                "{filter} AND ({}) > ({})",
                order.join(", "),
                marks.join(", ")
            );
            params.extend(after.iter().cloned());
        }
        let limit_mark = dialect.placeholder(params.len() + 1);
        params.push(Cell::Int(i64::try_from(limit).unwrap_or(i64::MAX)));
        let cols: Vec<&str> = self.columns().iter().map(|c| c.name).collect();
        (
            format!(
                "SELECT {} FROM {} WHERE {filter} ORDER BY {} LIMIT {limit_mark}",
                cols.join(", "),
                self.name(),
                order.join(", ")
            ),
            params,
        )
    }

    /// `SELECT count(*)` of `scope`.
    pub fn select_count(self, scope: &Scope, dialect: Dialect) -> (String, Vec<Cell>) {
        let (filter, params) = self.filter(scope, dialect);
        (
            format!("SELECT count(*) FROM {} WHERE {filter}", self.name()),
            params,
        )
    }

    /// `INSERT` of `rows` rows that leaves rows already there as they are. PostgreSQL's
    /// sessions take their revision from its sequence (SQLite's trigger sets it).
    pub fn insert(self, rows: usize, dialect: Dialect) -> String {
        let cols = self.columns();
        let rev = dialect == Dialect::Postgres && self == Table::Sessions;
        let mut names: Vec<&str> = cols.iter().map(|c| c.name).collect();
        if rev {
            names.push("rev");
        }
        let mut values = Vec::with_capacity(rows);
        for r in 0..rows {
            let mut marks: Vec<String> = (0..cols.len())
                .map(|i| dialect.placeholder(r * cols.len() + i + 1))
                .collect();
            if rev {
                marks.push("nextval('session_revs')".into());
            }
            values.push(format!("({})", marks.join(", ")));
        }
        format!(
            "INSERT INTO {} ({}) VALUES {} ON CONFLICT DO NOTHING",
            self.name(),
            names.join(", "),
            values.join(", ")
        )
    }

    /// Rows per `INSERT`, under both stores' limits on parameters.
    pub fn rows_per_insert(self) -> usize {
        (8000 / self.columns().len()).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_after_a_cursor_numbers_its_placeholders_in_order() {
        let scope = Scope::Session {
            key: "k".into(),
            session_id: "s".into(),
        };
        let (sql, params) = Table::Runs.select_page(
            &scope,
            &[Cell::Int(5), Cell::Text("r".into())],
            10,
            Dialect::Postgres,
        );
        assert!(sql.contains("session_key = $1"), "{sql}");
        assert!(sql.contains("(started_at, run_id) > ($2, $3)"), "{sql}");
        assert!(
            sql.ends_with("ORDER BY started_at, run_id LIMIT $4"),
            "{sql}"
        );
        assert_eq!(params.len(), 4);
        let insert = Table::Sessions.insert(2, Dialect::Postgres);
        assert!(insert.contains("($12, $13"), "{insert}");
        assert!(insert.contains("nextval('session_revs')"), "{insert}");
        assert!(!Table::Sessions.insert(1, Dialect::Sqlite).contains("rev"));
    }
}
