//! The console over several sources at once (issue 27): the merged sessions pane with its
//! source column, the same key on two sources as two rows, the header naming each source and
//! its link, a source that drops greyed rather than emptied, the source filter (`O`,
//! `:source`), and a send and a `/send off` reaching only the selected row's own source.
//! Sources are in-memory fakes behind the real `switchboard_sources::Sources`, so the
//! snapshots are the same every run.

use crate::common;
use crate::common::screen::{render, text};

use std::sync::Arc;

use crossterm::event::KeyCode;
use switchboard_sources::{Source, Sources};
use switchboard_tui::action::{Action, Intent};
use switchboard_tui::state::State;
use switchboard_types::api::source::SourceKind;
use switchboard_types::api::{LinkState, SessionKind, SessionsApi, TrafficCount};
use tokio::sync::watch;

use common::console_driver::Driver;
use common::fake_api::{self, Data, FakeApi};

const NOW: i64 = 1_750_000_000_000;
const MIN: i64 = 60_000;

/// Clock times blanked (`12:34:56` → `HH:MM:SS`): transcript lines show local times.
fn redact(screen: &str) -> String {
    let clock = regex::Regex::new(r"\b\d{2}:\d{2}:\d{2}\b").expect("regex");
    clock.replace_all(screen, "HH:MM:SS").into_owned()
}

fn fake(rows: &[(&str, Option<&str>, i64)]) -> Arc<FakeApi> {
    let mut data = Data::default();
    for (key, _, _) in rows {
        data.lines.insert(
            key.to_string(),
            (1..=3).map(|seq| fake_api::line(key, seq)).collect(),
        );
    }
    for (key, name, age) in rows {
        let mut r = fake_api::row(key, name.unwrap_or(key), SessionKind::Main, NOW - age);
        r.display_name = name.map(str::to_string);
        r.channel = "telegram".into();
        data.rows.push(r);
    }
    data.rows.sort_by_key(|r| std::cmp::Reverse(r.updated_at));
    // Traffic between its first two sessions: 6 exchanges in the last minutes, 2 capped.
    if let [a, b, ..] = rows {
        data.traffic = Some(vec![TrafficCount {
            requester: a.0.to_string(),
            target: b.0.to_string(),
            minute: (NOW / MIN - 2) * MIN,
            exchanges: 6,
            messages: 30,
            capped: 2,
            ..Default::default()
        }]);
    }
    Arc::new(FakeApi::new(data))
}

struct Three {
    api: Arc<Sources>,
    home: Arc<FakeApi>,
    team: Arc<FakeApi>,
    /// The third source's link state, set by the test.
    oc_state: watch::Sender<LinkState>,
}

/// home (local), team (a gateway, attached), oc (a gateway whose link the test moves).
fn three() -> Three {
    let home = fake(&[
        ("agent:main:main", Some("Alice (Telegram)"), 2 * MIN),
        ("agent:ops:main", None, 9 * MIN),
    ]);
    let team = fake(&[
        ("agent:main:main", Some("Team lead"), MIN),
        (
            "agent:ops:slack:group:incidents",
            Some("#incidents"),
            5 * MIN,
        ),
    ]);
    let oc = fake(&[("agent:main:discord:group:7", Some("#general"), 3 * MIN)]);
    let (oc_tx, _) = watch::channel(LinkState::Connected {
        protocol: 4,
        server: "openclaw 2026.9.6".into(),
        rtt_ms: Some(41),
        resynced: false,
    });
    let oc_link = oc_tx.subscribe();
    let oc_api: Arc<dyn SessionsApi> = Arc::new(Linked {
        inner: oc.clone(),
        state: oc_link,
    });
    let api = Sources::new(vec![
        Source::ready(
            "home",
            SourceKind::Local,
            "/home/alice/.local/share/switchboard",
            home.clone(),
        ),
        Source::ready(
            "team",
            SourceKind::Gateway,
            "wss://team.example:18789",
            team.clone(),
        ),
        Source::ready("oc", SourceKind::Gateway, "ws://127.0.0.1:18789", oc_api),
    ])
    .expect("three sources");
    Three {
        api,
        home,
        team,
        oc_state: oc_tx,
    }
}

/// A fake with a link (as a remote API has), whose state the test sets.
struct Linked {
    inner: Arc<FakeApi>,
    state: watch::Receiver<LinkState>,
}

#[async_trait::async_trait]
impl SessionsApi for Linked {
    async fn status(
        &self,
    ) -> Result<switchboard_types::api::Status, switchboard_types::api::ApiError> {
        self.inner.status().await
    }
    async fn sessions(
        &self,
        q: switchboard_types::api::SessionsQuery,
    ) -> Result<switchboard_types::api::SessionsPage, switchboard_types::api::ApiError> {
        if matches!(&*self.state.borrow(), LinkState::Connected { .. }) {
            self.inner.sessions(q).await
        } else {
            Err(switchboard_types::api::ApiError::Unavailable(
                "link down".into(),
            ))
        }
    }
    async fn session(
        &self,
        key: &str,
    ) -> Result<Option<switchboard_types::api::SessionDetail>, switchboard_types::api::ApiError>
    {
        self.inner.session(key).await
    }
    async fn transcript(
        &self,
        q: switchboard_types::api::TranscriptQuery,
    ) -> Result<switchboard_types::api::TranscriptPage, switchboard_types::api::ApiError> {
        self.inner.transcript(q).await
    }
    async fn resolve_key(
        &self,
        raw: &str,
        p: switchboard_types::api::KeyPurpose,
    ) -> Result<switchboard_types::api::ResolvedKey, switchboard_types::api::ApiError> {
        self.inner.resolve_key(raw, p).await
    }
    async fn send(
        &self,
        r: switchboard_types::api::SendRequest,
    ) -> Result<switchboard_types::api::SendReceipt, switchboard_types::api::ApiError> {
        self.inner.send(r).await
    }
    async fn wait_run(
        &self,
        id: &str,
        limit: std::time::Duration,
    ) -> Result<switchboard_types::api::RunResult, switchboard_types::api::ApiError> {
        self.inner.wait_run(id, limit).await
    }
    async fn wait_work(
        &self,
        w: switchboard_types::api::WorkId,
        limit: std::time::Duration,
    ) -> Result<bool, switchboard_types::api::ApiError> {
        self.inner.wait_work(w, limit).await
    }
    async fn still_running(
        &self,
        w: switchboard_types::api::WorkId,
    ) -> Result<Vec<(String, std::time::Duration)>, switchboard_types::api::ApiError> {
        self.inner.still_running(w).await
    }
    async fn call_tool(
        &self,
        c: switchboard_types::api::ToolCall,
    ) -> Result<switchboard_types::api::ToolResult, switchboard_types::api::ApiError> {
        self.inner.call_tool(c).await
    }
    async fn patch(
        &self,
        r: switchboard_types::api::PatchRequest,
    ) -> Result<switchboard_types::api::PatchResult, switchboard_types::api::ApiError> {
        self.inner.patch(r).await
    }
    async fn delete(&self, key: &str) -> Result<bool, switchboard_types::api::ApiError> {
        self.inner.delete(key).await
    }
    async fn agents(
        &self,
    ) -> Result<Vec<switchboard_types::api::AgentInfo>, switchboard_types::api::ApiError> {
        self.inner.agents().await
    }
    fn subscribe(&self) -> switchboard_types::api::EventStream {
        self.inner.subscribe()
    }
    fn link(&self) -> Option<switchboard_types::api::Link> {
        Some(switchboard_types::api::Link {
            target: "ws://127.0.0.1:18789".into(),
            state: self.state.clone(),
            unavailable: None,
        })
    }
}

fn state(api: &Sources) -> State {
    let mut s = State::new("unused with several sources".into(), NOW);
    s.width = 120;
    s.height = 24;
    s.sources = switchboard_tui::sources::Sources::new(api.sources());
    s
}

async fn driven(t: &Three) -> Driver {
    let mut d = Driver::new(t.api.clone(), state(&t.api));
    d.settle().await;
    d
}

fn keys_shown(d: &Driver) -> Vec<String> {
    d.console
        .state
        .sessions
        .rows
        .iter()
        .map(|r| r.key.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_merged_pane_lists_every_source_by_activity_with_a_source_column() {
    let t = three();
    let d = driven(&t).await;
    assert_eq!(
        keys_shown(&d),
        [
            "team/agent:main:main",
            "home/agent:main:main",
            "oc/agent:main:discord:group:7",
            "team/agent:ops:slack:group:incidents",
            "home/agent:ops:main",
        ]
    );
    insta::assert_snapshot!(redact(&text(&render(&d.console.state, 120, 24))));
    // With several sources the help lists the source filter's key.
    let mut s = d.console.state.clone();
    s.help = true;
    s.height = 40;
    let help = text(&render(&s, 120, 40));
    assert!(help.contains("O         filter by source"), "{help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_drops_is_greyed_and_named_in_the_header_not_emptied() {
    let t = three();
    let mut d = driven(&t).await;
    t.oc_state.send_replace(LinkState::Reconnecting {
        attempt: 2,
        retry_in_ms: 3_000,
        message: "connection refused".into(),
    });
    // The change reaches the console's view of the source (copied from the link by a task
    // of `Sources`), then is told as a notice, once.
    d.until("oc's link seen down", |s| {
        s.sources.list.iter().any(|v| {
            v.name == "oc"
                && v.state
                    .as_ref()
                    .is_some_and(|r| matches!(&*r.borrow(), LinkState::Reconnecting { .. }))
        })
    })
    .await;
    d.act(Action::LinkChanged);
    d.act(Action::LinkChanged);
    let told: Vec<String> = d
        .console
        .state
        .notices
        .iter()
        .map(|n| n.text.clone())
        .filter(|t| t.starts_with("source "))
        .collect();
    assert_eq!(told, ["source oc: lost, reconnecting: connection refused"]);
    // A reload while it is down keeps its rows (what it gave last), greyed.
    d.act(Action::Lagged);
    d.settle().await;
    assert!(
        keys_shown(&d).contains(&"oc/agent:main:discord:group:7".to_string()),
        "{:?}",
        keys_shown(&d)
    );
    let buf = render(&d.console.state, 120, 24);
    let screen = text(&buf);
    insta::assert_snapshot!(redact(&screen));
    assert!(
        screen
            .lines()
            .next()
            .is_some_and(|l| l.contains("oc ◌ reconnecting 3s")),
        "{screen}"
    );
    // The dropped source's row is dim; the others' are not.
    let row_y = screen
        .lines()
        .position(|l| l.contains("#general"))
        .expect("the row") as u16;
    let other_y = screen
        .lines()
        .position(|l| l.contains("Team lead"))
        .expect("the row") as u16;
    let dim = |y: u16| {
        buf[(10, y)]
            .modifier
            .contains(ratatui::style::Modifier::DIM)
    };
    assert!(dim(row_y), "greyed");
    assert!(!dim(other_y), "not greyed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_filter_shows_one_source_then_every_one() {
    let t = three();
    let mut d = driven(&t).await;
    d.intent(Intent::CycleSource);
    d.settle().await;
    assert_eq!(
        keys_shown(&d),
        ["home/agent:main:main", "home/agent:ops:main"]
    );
    d.intent(Intent::CycleSource);
    d.settle().await;
    assert_eq!(
        keys_shown(&d),
        [
            "team/agent:main:main",
            "team/agent:ops:slack:group:incidents"
        ]
    );
    insta::assert_snapshot!(redact(&text(&render(&d.console.state, 120, 24))));
    // `:source all` shows every source again; an unknown name is refused, naming them.
    d.press(KeyCode::Char(':'));
    d.type_text("source nope");
    d.press(KeyCode::Enter);
    let said = d.console.state.flash.clone().expect("an answer");
    assert!(
        said.error && said.text.contains("home, team, oc"),
        "{said:?}"
    );
    d.press(KeyCode::Char(':'));
    d.type_text("source all");
    d.press(KeyCode::Enter);
    d.settle().await;
    assert_eq!(keys_shown(&d).len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_and_send_off_reach_only_the_selected_rows_own_source() {
    let t = three();
    let mut d = driven(&t).await;
    // The second row: home's agent:main:main (team holds the same key).
    d.press(KeyCode::Char('j'));
    d.settle().await;
    assert_eq!(
        d.console.state.sessions.selected_key(),
        Some("home/agent:main:main")
    );
    d.press(KeyCode::Char('i'));
    d.type_text("hello home");
    d.press(KeyCode::Enter);
    d.type_text("/send off");
    d.press(KeyCode::Enter);
    d.settle().await;
    let home = t.home.data.lock().expect("data");
    let team = t.team.data.lock().expect("data");
    assert_eq!(
        home.sent
            .iter()
            .map(|r| (r.key.as_str(), r.text.as_str()))
            .collect::<Vec<_>>(),
        [
            ("agent:main:main", "hello home"),
            ("agent:main:main", "/send off")
        ]
    );
    assert!(team.sent.is_empty(), "{:?}", team.sent);
}

/// `/forward` carries the last lines of the session on one source into a session on another,
/// as the owner's message naming where they came from (never read as a command there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_carries_lines_from_one_source_into_a_session_on_another() {
    let t = three();
    let mut d = driven(&t).await;
    d.press(KeyCode::Char('j'));
    d.settle().await;
    assert_eq!(
        d.console.state.sessions.selected_key(),
        Some("home/agent:main:main")
    );
    d.until("home's transcript", |s| s.transcript.lines.len() == 3)
        .await;
    d.press(KeyCode::Char('i'));
    d.type_text("/forward team/agent:ops:slack:group:incidents 2");
    d.press(KeyCode::Enter);
    d.settle().await;
    {
        let team = t.team.data.lock().expect("data");
        let sent: Vec<(&str, &str)> = team
            .sent
            .iter()
            .map(|r| (r.key.as_str(), r.text.as_str()))
            .collect();
        assert_eq!(sent.len(), 1, "{sent:?}");
        let (key, text) = sent[0];
        assert_eq!(key, "agent:ops:slack:group:incidents");
        assert!(
            text.starts_with("Forwarded from home/agent:main:main (Alice (Telegram)):\n["),
            "{text}"
        );
        assert!(
            text.contains("] owner: agent:main:main says #2\n["),
            "{text}"
        );
        assert!(text.ends_with("] owner: agent:main:main says #3"), "{text}");
        assert!(!text.contains("says #1"), "{text}");
        assert!(team.sent[0].from.owner, "sent as the owner");
        assert!(t.home.data.lock().expect("data").sent.is_empty());
    }
    // `/status` names the session with its source.
    d.type_text("/status");
    d.press(KeyCode::Enter);
    d.settle().await;
    d.until("the status card", |s| {
        matches!(
            &s.card,
            Some(switchboard_tui::cards::Card::Status { rows: Some(_), .. })
        )
    })
    .await;
    let screen = text(&render(&d.console.state, 120, 24));
    assert!(
        screen.contains("home/agent:main:main (Alice (Telegram))"),
        "{screen}"
    );
    d.press(KeyCode::Esc);
    // Bad arguments get the usage line; nothing is sent.
    d.type_text("/forward");
    d.press(KeyCode::Enter);
    d.settle().await;
    let said = d.console.state.composer.error.clone().unwrap_or_default();
    assert!(said.contains("Usage: /forward <session> [lines]"), "{said}");
}

/// The traffic view merges every source's pairs, each named with its source: the same two
/// keys on two sources are two pairs, never one count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_traffic_view_shows_pairs_from_two_sources_apart() {
    let t = three();
    let mut d = driven(&t).await;
    d.intent(Intent::ToggleTraffic);
    d.settle().await;
    d.until("pairs from two sources", |s| {
        s.traffic.table().pairs.len() >= 2
    })
    .await;
    let screen = redact(&text(&render(&d.console.state, 120, 24)));
    insta::assert_snapshot!(screen.clone());
    assert!(
        screen.contains("home Alice (Telegram) → agent:ops:main"),
        "{screen}"
    );
    assert!(screen.contains("team Team lead → #incidents"), "{screen}");
    // By agent: the same two agents on two sources are two pairs.
    d.intent(Intent::ToggleRoundsScope);
    d.settle().await;
    // The app orders the shown table before each frame.
    d.console.state.traffic.prepare(20);
    let screen = redact(&text(&render(&d.console.state, 120, 24)));
    assert!(screen.contains("home agent:main → agent:ops"), "{screen}");
    assert!(screen.contains("team agent:main → agent:ops"), "{screen}");
}
