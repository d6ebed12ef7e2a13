//! The store on disk: errors, WAL, several processes on one folder, and importing OpenClaw folders
//! (current, legacy, hostile) checked against what OpenClaw itself returned.
//!
//! One test binary per area: each file below was its own binary, linking the whole library
//! once per file. Shared helpers are declared once here and used as `crate::common::…`.

#[path = "../common/mod.rs"]
mod common;

mod import_hostile;
mod import_merge;
mod import_sqlite;
mod openclaw_shapes;
mod storage_errors;
mod storage_outbox;
mod storage_pairings;
mod storage_postgres;
mod storage_processes;
mod storage_wal;
