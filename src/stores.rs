//! The stores opened for `switchboard store copy` and `store check`, by how a user names them:
//! a `postgres://` URL or a state folder. Beside `state_folder.rs`, the other place that names
//! the stores; the copy and the check themselves only know `switchboard_store`'s traits.

use std::path::Path;

use switchboard_store::StoreError;
use switchboard_store::check::CheckReport;
use switchboard_store::copy::CopyStore;
use switchboard_store_postgres::copy::PgCopy;
use switchboard_store_sqlite::copy::SqliteCopy;

/// Which store a name means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Sqlite,
    Postgres,
}

impl StoreKind {
    /// A `postgres://` (or `postgresql://`) URL is PostgreSQL; anything else a state folder.
    pub fn of(spec: &str) -> StoreKind {
        let lower = spec.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            StoreKind::Postgres
        } else {
            StoreKind::Sqlite
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Postgres => "postgresql",
        }
    }
}

/// `spec` as a message may show it: a URL without its password.
pub fn shown(spec: &str) -> String {
    match StoreKind::of(spec) {
        StoreKind::Postgres => switchboard_store_postgres::redact(spec),
        StoreKind::Sqlite => spec.to_string(),
    }
}

/// Open `spec` for a copy: as its source (a state folder must exist) or its destination
/// (made when missing). Either is migrated to this build's schema; a newer one is refused.
pub fn open_for_copy(spec: &str, destination: bool) -> Result<Box<dyn CopyStore>, StoreError> {
    Ok(match StoreKind::of(spec) {
        StoreKind::Postgres => Box::new(PgCopy::open(spec)?),
        StoreKind::Sqlite => Box::new(SqliteCopy::open(Path::new(spec), destination)?),
    })
}

/// Check the PostgreSQL database at `url` without changing it (`store check` when the state
/// is there): where it is, as a user names it, and the report. Blocking.
pub fn check_postgres(url: &str) -> Result<(String, CheckReport), StoreError> {
    switchboard_store_postgres::check::check_url(url)
}
