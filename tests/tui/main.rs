//! The console without a terminal: `update` and `view` on a `TestBackend`, with insta snapshots in
//! `tui/snapshots/`.
//!
//! One test binary per area: each file below was its own binary, linking the whole library
//! once per file. Shared helpers are declared once here and used as `crate::common::…`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../remote/openclaw_record.rs"]
mod openclaw_record;

mod tui_composer;
mod tui_console;
mod tui_deliveries;
mod tui_drill;
mod tui_exchanges;
mod tui_header_link;
mod tui_navigation;
mod tui_openclaw;
mod tui_out_of_order;
mod tui_sessions_pane;
mod tui_snapshots;
mod tui_sources;
mod tui_streaming;
mod tui_streaming_engine;
mod tui_traffic;
mod tui_transcript;
