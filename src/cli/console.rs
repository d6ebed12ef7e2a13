//! The console front end (`switchboard`, `switchboard demo`), the overview printed when
//! there is no terminal, and `switchboard keys`.

use std::path::PathBuf;

use anyhow::{Context, Result};

use switchboard_config::{self as config};
use switchboard_types::text_safety::safe_line;

use super::args::Cli;
use super::print::say_log;
use super::sources::Plan;
use super::usage;

/// The terminal the console would draw on, checked before anything is started: none at
/// all (stdin or stdout not a tty, `ssh host switchboard demo` without -t) or `TERM=dumb`
/// is refused with exit 2, before raw mode could fail with an OS error.
fn console_terminal() -> Result<switchboard_tui::theme::Theme> {
    if !super::args::on_terminal() {
        return Err(usage("the console needs a terminal (with ssh, use ssh -t)"));
    }
    switchboard_tui::theme::Theme::from_env().map_err(|e| usage(e.to_string()))
}

/// The keymap the console uses: the defaults plus `<config dir>/switchboard/keymap.json5`.
fn load_keymap() -> Result<switchboard_tui::keymap::Keymap> {
    use switchboard_tui::keymap::Keymap;
    Ok(
        match dirs::config_dir().map(|d| d.join("switchboard").join("keymap.json5")) {
            Some(path) if path.exists() => {
                let text = switchboard_config::text_limits::read_capped(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?
                    .map_err(|e| usage(format!("{}: {e}", path.display())))?;
                Keymap::with_overrides(&text)
                    .map_err(|e| usage(format!("{}: {e}", path.display())))?
            }
            _ => Keymap::defaults(),
        },
    )
}

/// `keys`: the key reference, from the same keymap the console loads.
pub(crate) fn keys(markdown: bool, defaults: bool) -> Result<()> {
    use switchboard_tui::{keymap::Keymap, keys_doc};
    let keymap = if defaults {
        Keymap::defaults()
    } else {
        load_keymap()?
    };
    let out = if markdown {
        keys_doc::markdown(&keymap)
    } else {
        keys_doc::text(&keymap)
    };
    print!("{out}");
    Ok(())
}

/// The console's options: the keymap (defaults plus `<config dir>/switchboard/keymap.json5`)
/// and NO_COLOR.
fn console_options(attached: String) -> Result<switchboard_tui::Options> {
    let keymap = load_keymap()?;
    Ok(switchboard_tui::Options {
        attached,
        keymap,
        no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        theme: console_terminal()?,
        notices: Vec::new(),
        open_on: None,
    })
}

/// No command: the console on the embedded engine, or an overview when not on a terminal.
pub(crate) async fn console(cli: &Cli, log: Option<PathBuf>) -> Result<()> {
    if !super::args::on_terminal() {
        return overview(cli).await;
    }
    let config = cli.load_config()?;
    let (local, gateways) = match cli.plan(&config)? {
        Plan::Single(g) => {
            let api = cli.remote_api(&g).await?;
            let options = console_options(safe_line(&g.url).into_owned())?;
            say_log(&log);
            return switchboard_tui::run(api, options).await;
        }
        Plan::Local => (true, Vec::new()),
        Plan::Several { local, gateways } => (local.is_some(), gateways),
    };
    let notices = config::warnings(&config)
        .iter()
        .map(|w| format!("config: {w}"))
        .collect();
    let dir = cli.state_dir();
    let local_name = config.local_source.clone();
    let engine = local
        .then(|| {
            switchboard::state_folder::open_engine(&dir, config.clone())
                .with_context(|| format!("cannot open the state folder {}", dir.display()))
        })
        .transpose()?;
    let started = engine.as_ref().map(switchboard_engine::Engine::start);
    // The console's own engine sends its deliveries too (when channels are configured).
    let channels = match (&engine, &started) {
        (Some(engine), Some(api)) => switchboard::channels::start(engine, api, &config, None)?,
        _ => None,
    };
    let (api, attached) = if gateways.is_empty() {
        match started {
            Some(api) => (api, dir.display().to_string()),
            None => return Err(usage("nothing to attach to")),
        }
    } else {
        // Several sources: the console shows each one's link; nothing waits for them here.
        let sources = cli.several(started.map(|api| (local_name, api)), &gateways)?;
        let names: Vec<String> = switchboard_types::api::SessionsApi::sources(sources.as_ref())
            .into_iter()
            .map(|s| s.name)
            .collect();
        // Gateways the config named are taken out when it stops naming them.
        let from_config: Vec<String> = gateways
            .iter()
            .filter(|g| g.entry.is_some())
            .filter_map(|g| g.name.clone())
            .collect();
        if !from_config.is_empty()
            && let Ok(path) = cli.config_path()
        {
            watch_config(path, sources.clone(), from_config);
        }
        let api: std::sync::Arc<dyn switchboard_types::api::SessionsApi> = sources;
        (api, names.join(" · "))
    };
    let mut options = console_options(attached)?;
    options.notices = notices;
    say_log(&log);
    let result = switchboard_tui::run(api, options).await;
    if let Some(channels) = channels {
        channels.stop().await;
    }
    drop(engine);
    result
}

/// How often the console looks at the config file for gateways taken out of it.
const CONFIG_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// While the console runs: when the config file changes and no longer names a gateway it
/// was attached to from the config, that source is taken out (its rows leave, the header
/// and a notice say "removed from the config"). A config that does not parse changes
/// nothing (logged). Gateways added are attached by the next start (logged).
fn watch_config(
    path: PathBuf,
    sources: std::sync::Arc<switchboard_sources::Sources>,
    mut attached: Vec<String>,
) {
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let mut seen = modified(&path);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(CONFIG_CHECK).await;
            let now = modified(&path);
            if now == seen {
                continue;
            }
            seen = now;
            // A config file removed names no gateway.
            let named: Vec<String> = if path.exists() {
                match config::load_file(&path) {
                    Ok(c) => c.gateways.into_iter().map(|g| g.name).collect(),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "the config changed but does not load; the sources stay as they are");
                        continue;
                    }
                }
            } else {
                Vec::new()
            };
            attached.retain(|name| {
                if named.contains(name) {
                    return true;
                }
                tracing::info!(source = %name, "a gateway left the config; its source is taken out");
                sources.remove(name);
                false
            });
            for name in named.iter().filter(|n| !attached.contains(n)) {
                tracing::info!(source = %name, "a gateway was added to the config; it is attached at the next start");
            }
        }
    });
}

/// `switchboard demo`: a temporary state, the demo agents, traffic, and the console.
pub(crate) async fn demo(_cli: &Cli, pace_ms: u64, log: Option<PathBuf>) -> Result<()> {
    // Refused before a state folder is made or traffic started.
    console_terminal()?;
    let dir = tempfile_dir()?;
    let config = switchboard::demo::demo_config()?;
    let engine = switchboard::state_folder::open_engine(&dir, config)
        .with_context(|| format!("cannot open the demo state {}", dir.display()))?;
    // Seeding runs beside the console, which draws at once and fills in as it lands.
    let traffic = switchboard::demo::start(
        engine.start(),
        // Below about 200 ms the demo's agents cannot keep up and the queues only grow.
        std::time::Duration::from_millis(pace_ms.max(200)),
    );
    let options = switchboard_tui::Options {
        // Alice's chat with main: main's exchanges with ops and research start there, so the
        // rounds pane has something from the first second, the same session every run.
        open_on: Some(switchboard::demo::OPENING.to_string()),
        ..console_options(format!("demo {}", dir.display()))?
    };
    say_log(&log);
    let result = switchboard_tui::run(engine.start(), options).await;
    traffic.abort();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// A fresh folder under the system temp dir for the demo's state.
pub(crate) fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "switchboard-demo-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

pub(crate) async fn overview(cli: &Cli) -> Result<()> {
    let dir = cli.state_dir();
    // Only reads: a folder that is not there yet is reported, not made.
    let config = cli.load_config()?;
    let several = !cli.connect.is_empty() || !config.gateways.is_empty();
    if !several && !switchboard::state_folder::has_state(&dir, &config) {
        println!(
            "Switchboard state: {} (not made yet: the console or a first `inject` makes it)",
            dir.display()
        );
        println!("Sessions: 0");
    } else {
        let api = cli.reading_api().await?;
        let status = api.status().await?;
        match cli.connect.as_slice() {
            [target] if api.sources().is_empty() => {
                println!("Switchboard gateway: {}", safe_line(target))
            }
            _ if !api.sources().is_empty() => println!("Switchboard sources: {}", status.attached),
            _ => println!("Switchboard state: {}", status.attached),
        }
        println!("Sessions: {}", status.sessions);
    }
    println!();
    println!("Try:");
    println!("  switchboard inject agent:main:main \"hello\" --channel telegram --sender alice");
    println!("  switchboard sessions list");
    println!("  switchboard tool sessions_history '{{\"sessionKey\": \"main\"}}'");
    println!("  switchboard --help");
    Ok(())
}
