//! Issue 15's import figures: one timed run each (criterion's repetition would re-import
//! 100,000 sessions dozens of times) of importing a legacy OpenClaw store into a fresh state,
//! then importing the same folder again with nothing new (the merge's shortcut).
//!
//! The store is generated with the OpenClaw peer's generator, so OpenClaw and Switchboard are
//! measured on the same data:
//!
//! ```sh
//! python3 ../shared/peers/openclaw/gen_legacy_store.py target/bench-import/store \
//!     --sessions 100000 --messages 1000000
//! SB_IMPORT_STORE=target/bench-import/store cargo bench --bench import
//! ```
//!
//! Results are in BENCHMARKS.md ("Issue 15: import").

use std::path::PathBuf;
use std::time::Instant;

use switchboard_config::Config;

fn main() {
    let store = PathBuf::from(
        std::env::var("SB_IMPORT_STORE").unwrap_or_else(|_| "target/bench-import/store".into()),
    );
    if !store.join("agents").is_dir() {
        eprintln!(
            "no legacy store at {} (generate it first, see benches/import.rs); skipped",
            store.display()
        );
        return;
    }
    let state = tempfile::tempdir_in("target").expect("a state folder under target/");
    let engine = switchboard::state_folder::open_engine(state.path(), Config::default())
        .expect("open the state");
    let rt = tokio::runtime::Runtime::new().expect("a runtime");

    let t = Instant::now();
    let first = rt
        .block_on(engine.import_openclaw(&store))
        .expect("the import");
    let import = t.elapsed();
    println!(
        "import: {} sessions, {} lines in {:.2} s",
        first.sessions_imported,
        first.lines_imported,
        import.as_secs_f64()
    );
    assert!(first.skipped.is_empty(), "{:?}", first.skipped);

    let t = Instant::now();
    let again = rt
        .block_on(engine.import_openclaw(&store))
        .expect("the re-import");
    let reimport = t.elapsed();
    println!(
        "re-import, nothing new: {} unchanged, {} updated, {} new in {:.2} s",
        again.sessions_present,
        again.sessions_updated,
        again.sessions_imported,
        reimport.as_secs_f64()
    );
    assert!(again.changed_nothing(), "{again:?}");
    assert_eq!(again.sessions_present, first.sessions_imported);
}
