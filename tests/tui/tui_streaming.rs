//! A reply streamed into the console: `Console::update` driven by hand with the events and
//! load results the engine would give (no I/O in `update`), and the screen drawn on ratatui's
//! `TestBackend`. Covers the provisional line growing under the transcript, its replacement
//! by the real line (never both, never neither), a missed delta shown as a gap, hostile delta
//! text, the per-run cap, the sessions-list marker, and a scrolled-up view that stays put.
//! Snapshots live in tests/tui/snapshots/ (`INSTA_UPDATE=always cargo test --test tui tui_streaming::`).

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::effects::Effect;
use switchboard_tui::keymap::Keymap;
use switchboard_tui::state::{Focus, State};
use switchboard_tui::streams::{GAP_MARKER, STREAM_MAX_BYTES};
use switchboard_tui::update::Console;
use switchboard_tui::view;
use switchboard_types::api::{
    EngineEvent, LineRole, PolicyView, SessionKind, SessionRow, SessionsPage, TranscriptLine,
    TranscriptPage,
};

/// 2025-06-15 15:06:40 UTC.
const NOW: i64 = 1_750_000_000_000;
const MAIN: &str = "agent:main:main";
const OPS: &str = "agent:ops:main";
const RUN: &str = "run-1";

fn row(key: &str, running: bool) -> SessionRow {
    SessionRow {
        key: key.into(),
        display_key: key.into(),
        kind: SessionKind::Main,
        agent_id: key.split(':').nth(1).unwrap_or("main").into(),
        channel: "webchat".into(),
        name: key.into(),
        label: None,
        display_name: None,
        session_id: format!("sid-{key}"),
        updated_at: NOW - 60_000,
        policy: PolicyView {
            policy: "allow".parse().unwrap(),
            source: "default".parse().unwrap(),
            rule: None,
            matched: None,
            detail: "default".into(),
            summary: "allow".into(),
        },
        running,
        archived: false,
        agents_stopped: false,
        entry: None,
        last_message: None,
    }
}

fn line(seq: i64, role: LineRole, from: &str, text: &str) -> TranscriptLine {
    TranscriptLine {
        seq,
        role,
        timestamp: NOW - 30_000 + seq * 1000,
        from: from.into(),
        text: text.into(),
        message: None,
    }
}

/// A console as the loop runs it, with the loads it asks for answered by hand.
struct Harness {
    console: Console,
    /// The transcript load asked for and not yet answered: (generation, key).
    transcript_load: Option<(u64, String)>,
    sessions_load: Option<u64>,
}

impl Harness {
    /// MAIN selected (and OPS below it), MAIN's transcript holding one owner message.
    fn new() -> Harness {
        let mut h = Harness {
            console: Console::new(State::new("/srv/state".into(), NOW)),
            transcript_load: None,
            sessions_load: None,
        };
        h.effects_of(None);
        h.answer_sessions(vec![row(MAIN, true), row(OPS, false)]);
        h.answer_transcript(
            vec![line(1, LineRole::User, "alice (owner)", "hi there")],
            1,
        );
        assert!(h.transcript_load.is_none() && h.sessions_load.is_none());
        h
    }

    /// Note the loads among `effects` plus what `refresh` asks for.
    fn effects_of(&mut self, effects: Option<Vec<Effect>>) {
        let mut all = effects.unwrap_or_default();
        all.extend(self.console.refresh());
        for e in all {
            match e {
                Effect::LoadSessions { generation, .. } => self.sessions_load = Some(generation),
                Effect::LoadTranscript { generation, query } => {
                    self.transcript_load = Some((generation, query.key))
                }
                _ => {}
            }
        }
    }

    fn act(&mut self, a: Action) {
        let effects = self.console.update(a);
        self.effects_of(Some(effects));
    }

    fn event(&mut self, e: EngineEvent) {
        self.act(Action::Engine(Box::new(e)));
    }

    fn answer_sessions(&mut self, rows: Vec<SessionRow>) {
        let generation = self
            .sessions_load
            .take()
            .expect("a sessions load was asked for");
        let n = rows.len() as u64;
        self.act(Action::SessionsLoaded {
            generation,
            result: Box::new(Ok(SessionsPage {
                rows,
                offset: 0,
                matching: Some(n),
                total: n,
                ..SessionsPage::default()
            })),
        });
    }

    fn answer_transcript(&mut self, lines: Vec<TranscriptLine>, last_seq: i64) {
        let (generation, key) = self
            .transcript_load
            .take()
            .expect("a transcript load was asked for");
        self.act(Action::TranscriptLoaded {
            generation,
            key: key.clone(),
            result: Box::new(Ok(TranscriptPage {
                key,
                exists: true,
                lines,
                last_seq,
                left_out: 0,
            })),
        });
    }

    fn delta(&mut self, key: &str, run: &str, step: u32, offset: usize, text: &str) {
        self.event(EngineEvent::ReplyDelta {
            run_id: run.into(),
            key: key.into(),
            agent_id: "main".into(),
            step,
            offset,
            delta: text.into(),
        });
    }

    /// The run's reply line, appended as the engine appends it.
    fn reply_appended(&mut self, key: &str, run: &str, seq: i64, text: &str) {
        self.event(EngineEvent::MessageAppended {
            key: key.into(),
            session_id: format!("sid-{key}"),
            seq,
            line: json!({
                "type": "message",
                "id": format!("m{seq}"),
                "message": {
                    "role": "assistant",
                    "content": [{ "type": "text", "text": text }],
                    "stopReason": "stop",
                    "timestamp": NOW,
                    "__switchboard": { "runId": run, "step": "message", "round": 0 },
                },
            }),
        });
    }

    fn run_ended(&mut self, key: &str, run: &str) {
        self.run_ended_with(key, run, None);
    }

    fn run_ended_with(&mut self, key: &str, run: &str, reply: Option<&str>) {
        self.event(EngineEvent::RunEnded {
            run_id: run.into(),
            key: key.into(),
            step: "message".parse().unwrap(),
            round: 0,
            status: "ok".parse().unwrap(),
            reply: reply.map(str::to_string),
            error: None,
            duration_ms: 10,
            tokens_in: None,
            tokens_out: None,
            exchange_id: None,
        });
    }

    fn screen(&self, w: u16, h: u16) -> String {
        let keymap = Keymap::defaults();
        let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
        terminal
            .draw(|f| view::draw(f, &self.console.state, &keymap))
            .expect("draw");
        let buf = terminal.backend().buffer().clone();
        let mut out = String::new();
        for y in 0..h {
            let mut l = String::new();
            for x in 0..w {
                l.push_str(buf[(x, y)].symbol());
            }
            out.push_str(l.trim_end());
            out.push('\n');
        }
        out
    }
}

#[test]
fn a_reply_mid_stream_shows_provisionally_with_an_indicator() {
    let mut h = Harness::new();
    h.delta(MAIN, RUN, 1, 0, "Hello ");
    h.delta(MAIN, RUN, 1, 6, "from the ");
    h.delta(MAIN, RUN, 1, 15, "model");
    let shown = h.screen(100, 24);
    assert!(
        shown.contains("agent: Hello from the model▍ streaming…"),
        "{shown}"
    );
    // The sessions list marks the session being written in, not the other one.
    assert!(shown.contains("▍ main  agent:main:main"), "{shown}");
    assert!(!shown.contains("▍ main  agent:ops:main"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn the_real_line_replaces_the_provisional_one_without_a_frame_of_both_or_neither() {
    let mut h = Harness::new();
    h.delta(MAIN, RUN, 1, 0, "Hello ");
    h.delta(MAIN, RUN, 1, 6, "world");
    h.reply_appended(MAIN, RUN, 2, "Hello world");
    // The line is appended; its load is under way: the provisional text stays meanwhile.
    assert!(h.transcript_load.is_some(), "the reply line must be loaded");
    let waiting = h.screen(100, 24);
    assert_eq!(waiting.matches("Hello world").count(), 1, "{waiting}");
    assert!(!waiting.contains("streaming…"), "{waiting}");
    h.run_ended(MAIN, RUN);
    let ended = h.screen(100, 24);
    assert_eq!(ended.matches("Hello world").count(), 1, "{ended}");
    // A load that started before the line was written does not take the text away.
    let (generation, key) = h.transcript_load.clone().expect("load");
    h.act(Action::TranscriptLoaded {
        generation,
        key: key.clone(),
        result: Box::new(Ok(TranscriptPage {
            key,
            exists: true,
            lines: vec![line(1, LineRole::User, "alice (owner)", "hi there")],
            last_seq: 1,
            left_out: 0,
        })),
    });
    let stale = h.screen(100, 24);
    assert_eq!(stale.matches("Hello world").count(), 1, "{stale}");
    // The load that holds the line: the real line, once, and no provisional text left.
    h.transcript_load = Some((generation, MAIN.into()));
    h.answer_transcript(
        vec![
            line(1, LineRole::User, "alice (owner)", "hi there"),
            line(2, LineRole::Assistant, "agent", "Hello world"),
        ],
        2,
    );
    let done = h.screen(100, 24);
    assert_eq!(done.matches("Hello world").count(), 1, "{done}");
    assert!(!done.contains('▍'), "{done}");
    assert!(h.console.state.transcript.streams.runs.is_empty());
    insta::assert_snapshot!(done);
}

#[test]
fn a_missed_delta_shows_a_gap_marker_never_joined_text() {
    let mut h = Harness::new();
    h.delta(MAIN, RUN, 1, 0, "The answer ");
    // 11..20 never arrived.
    h.delta(MAIN, RUN, 1, 20, "forty-two");
    let text = &h.console.state.transcript.streams.runs[RUN].text;
    assert_eq!(text, &format!("The answer {GAP_MARKER}forty-two"));
    let shown = h.screen(100, 24);
    assert!(shown.contains("text missed"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn a_stream_joined_mid_way_starts_with_a_gap_and_repeats_are_not_doubled() {
    let mut h = Harness::new();
    // The console came up (or reloaded) while the reply was under way.
    h.delta(MAIN, RUN, 1, 40, "end of it");
    h.delta(MAIN, RUN, 1, 40, "end of it");
    h.delta(MAIN, RUN, 1, 44, "of it, and more");
    let s = &h.console.state.transcript.streams.runs[RUN];
    assert_eq!(s.text, format!("{GAP_MARKER}end of it, and more"));
    assert_eq!(s.end, 59);
}

#[test]
fn a_new_model_call_in_the_same_run_starts_its_text_afresh() {
    let mut h = Harness::new();
    h.delta(MAIN, RUN, 1, 0, "Let me check.");
    h.delta(MAIN, RUN, 2, 0, "Checked: ");
    h.delta(MAIN, RUN, 2, 9, "fine");
    // A late delta of the first call is ignored.
    h.delta(MAIN, RUN, 1, 13, " more");
    assert_eq!(
        h.console.state.transcript.streams.runs[RUN].text,
        "Checked: fine"
    );
}

#[test]
fn delta_text_is_made_safe_before_it_reaches_the_screen() {
    let mut h = Harness::new();
    h.delta(MAIN, RUN, 1, 0, "red\u{1b}]0;pwned\u{7}\u{202e}txt");
    let text = h.console.state.transcript.streams.runs[RUN].text.clone();
    assert_eq!(text, "red^[]0;pwned^G\\u{202e}txt");
    let shown = h.screen(100, 24);
    assert!(!shown.contains('\u{1b}') && !shown.contains('\u{202e}'));
    assert!(shown.contains("red^[]0;pwned^G"), "{shown}");
}

#[test]
fn provisional_text_is_capped_to_its_newest_part() {
    let mut h = Harness::new();
    let chunk = "é".repeat(512); // 1 KiB, two bytes a character
    for i in 0..100 {
        h.delta(MAIN, RUN, 1, i * chunk.len(), &chunk);
    }
    h.delta(MAIN, RUN, 1, 100 * chunk.len(), "THE END");
    let s = &h.console.state.transcript.streams.runs[RUN];
    assert!(s.text.len() <= STREAM_MAX_BYTES, "{}", s.text.len());
    assert!(s.cut);
    assert!(s.text.ends_with("THE END"));
    assert_eq!(s.end, 100 * 1024 + 7);
    let shown = h.screen(100, 24);
    assert!(shown.contains("THE END▍"), "{shown}");
}

#[test]
fn a_run_that_ends_without_a_line_leaves_nothing_behind() {
    let mut h = Harness::new();
    h.delta(MAIN, RUN, 1, 0, "REPLY_SK");
    h.run_ended(MAIN, RUN);
    assert!(h.console.state.transcript.streams.runs.is_empty());
    let shown = h.screen(100, 24);
    assert!(!shown.contains("REPLY_SK"), "{shown}");
}

#[test]
fn another_sessions_stream_is_marked_in_the_list_only_and_freed_on_its_line() {
    let mut h = Harness::new();
    h.delta(OPS, "run-ops", 1, 0, "ops talking");
    let shown = h.screen(100, 24);
    assert!(!shown.contains("ops talking"), "{shown}");
    assert!(shown.contains("▍ main  agent:ops:main"), "{shown}");
    // Its line arrives while it is not shown: nothing is kept waiting for a load.
    h.reply_appended(OPS, "run-ops", 1, "ops talking");
    assert!(h.console.state.transcript.streams.runs.is_empty());
    assert_eq!(h.console.state.sessions.unread.get(OPS), Some(&1));
}

#[test]
fn a_sessions_page_saying_a_run_is_over_drops_its_stale_stream() {
    let mut h = Harness::new();
    h.delta(OPS, "run-ops", 1, 0, "half a repl");
    // Its end was missed (the console lagged); the next page says ops is idle.
    h.act(Action::Lagged);
    h.answer_sessions(vec![row(MAIN, true), row(OPS, false)]);
    assert!(h.console.state.transcript.streams.runs.is_empty());
}

/// A page read before the run began says "not running": the live stream stays (dropping it
/// would show the rest of the reply after a false gap).
#[test]
fn a_sessions_page_older_than_the_run_does_not_cut_its_stream() {
    let mut h = Harness::new();
    h.delta(OPS, "run-ops", 1, 0, "first ");
    h.event(EngineEvent::SessionUpdated { key: OPS.into() });
    h.answer_sessions(vec![row(MAIN, true), row(OPS, false)]);
    h.delta(OPS, "run-ops", 1, 6, "second");
    assert_eq!(
        h.console.state.transcript.streams.runs["run-ops"].text,
        "first second"
    );
}

#[test]
fn a_scrolled_up_view_stays_on_its_rows_while_a_reply_grows() {
    let mut h = Harness::new();
    let lines: Vec<TranscriptLine> = (1..=60)
        .map(|i| {
            line(
                i,
                LineRole::User,
                "alice (owner)",
                &format!("message number {i}"),
            )
        })
        .collect();
    h.act(Action::Lagged);
    h.answer_sessions(vec![row(MAIN, true), row(OPS, false)]);
    h.answer_transcript(lines, 60);
    // Ten rows up from the end (the transcript focused, as the owner would scroll).
    h.console.state.focus = Focus::Transcript;
    for _ in 0..10 {
        h.console.update(Action::Intent(Intent::Up));
    }
    assert!(!h.console.state.transcript.follow);
    let before = h.screen(100, 24);
    h.delta(MAIN, RUN, 1, 0, "one\ntwo\nthree\n");
    let after = h.screen(100, 24);
    let r = view::regions(100, 24).transcript;
    let pane = |s: &str| {
        s.lines()
            .skip(r.y as usize)
            .take(r.height as usize)
            .map(|l| l.chars().skip(r.x as usize).collect::<String>())
            .collect::<Vec<_>>()
    };
    assert_eq!(pane(&before), pane(&after));
    // Following, the reply is at the bottom.
    h.console.update(Action::Intent(Intent::Bottom));
    assert!(h.console.state.transcript.follow);
    let following = h.screen(100, 24);
    assert!(following.contains("three"), "{following}");
}

/// On an OpenClaw gateway the reply line carries no run id and the run's end may come
/// first: the provisional line then shows the whole reply until the line is loaded.
#[test]
fn a_run_ending_before_its_untagged_line_keeps_the_whole_reply_until_the_line_loads() {
    let mut h = Harness::new();
    h.delta(MAIN, RUN, 1, 0, "Hello ");
    h.run_ended_with(MAIN, RUN, Some("Hello world"));
    let ended = h.screen(100, 24);
    assert_eq!(ended.matches("Hello world").count(), 1, "{ended}");
    assert!(!ended.contains("streaming…"), "{ended}");
    // The line, as a gateway announces it (no run id): the load that brings it replaces
    // the provisional text.
    h.event(EngineEvent::MessageAppended {
        key: MAIN.into(),
        session_id: "sid".into(),
        seq: 2,
        line: json!({"type": "message", "message": {"role": "assistant",
                     "content": [{"type": "text", "text": "Hello world"}]}}),
    });
    h.answer_transcript(
        vec![
            line(1, LineRole::User, "alice (owner)", "hi there"),
            line(2, LineRole::Assistant, "agent", "Hello world"),
        ],
        2,
    );
    let done = h.screen(100, 24);
    assert_eq!(done.matches("Hello world").count(), 1, "{done}");
    assert!(h.console.state.transcript.streams.runs.is_empty());
}
