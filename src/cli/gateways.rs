//! `switchboard gateways`: every source the console and the read commands attach to, each
//! dialled at once and reported as it stands after a bounded wait (connected with its
//! server's version, refused, unreachable, still connecting), with what it does not expose.

use std::sync::Arc;

use anyhow::Result;
use serde_json::{Value, json};

use switchboard_types::api::SessionsApi;
use switchboard_types::text_safety::safe_line;

use super::args::Cli;
use super::print::{print_columns, print_json};
use super::sources::{ATTACH_WAIT, GatewayPlan, Plan, Settled, settle};

/// One source as listed.
struct Row {
    name: String,
    kind: &'static str,
    target: String,
    /// `None`: the local folder is not made yet.
    settled: Option<Settled>,
    unavailable: Option<String>,
}

impl Row {
    fn state(&self) -> &'static str {
        self.settled.as_ref().map_or("missing", Settled::word)
    }

    fn message(&self) -> Option<String> {
        match &self.settled {
            None => {
                Some("no state folder here yet: the console or a first `inject` makes it".into())
            }
            Some(s) => s.problem(),
        }
    }

    fn server(&self) -> Option<String> {
        match &self.settled {
            Some(Settled::Connected { server, .. }) => Some(server.clone()),
            Some(Settled::Local) => Some(format!("switchboard {}", env!("CARGO_PKG_VERSION"))),
            _ => None,
        }
    }

    fn json(&self) -> Value {
        let (protocol, rtt) = match &self.settled {
            Some(Settled::Connected {
                protocol, rtt_ms, ..
            }) => (Some(*protocol), *rtt_ms),
            _ => (None, None),
        };
        json!({
            "name": self.name,
            "kind": self.kind,
            "target": self.target,
            "state": self.state(),
            "message": self.message(),
            "server": self.server(),
            "protocol": protocol,
            "rttMs": rtt,
            "unavailable": self.unavailable,
        })
    }
}

pub(crate) async fn gateways(cli: &Cli, json: bool) -> Result<()> {
    let config = cli.load_config()?;
    let dir = cli.state_dir();
    let (local, gateways): (Option<String>, Vec<GatewayPlan>) = match cli.plan(&config)? {
        Plan::Local => (Some(config.local_source.clone()), Vec::new()),
        Plan::Single(g) => (None, vec![g]),
        Plan::Several { local, gateways } => (local, gateways),
    };
    let mut rows = Vec::new();
    // The local folder is listed whether or not it is made; it is opened only to be
    // checked by `Sources` with the others (names and places given twice).
    let exists = switchboard::state_folder::has_state(&dir, &config);
    let local_api = match &local {
        Some(name) if exists => {
            let api: Arc<dyn SessionsApi> = Arc::new(cli.open_engine_for_reading()?);
            Some((name.clone(), api))
        }
        Some(name) => {
            rows.push(Row {
                name: name.clone(),
                kind: "local",
                target: dir.display().to_string(),
                settled: None,
                unavailable: None,
            });
            None
        }
        None => None,
    };
    if local_api.is_some() || !gateways.is_empty() {
        let api = cli.several(local_api, &gateways)?;
        for (info, settled) in settle(api.as_ref(), ATTACH_WAIT).await {
            rows.push(Row {
                name: info.name,
                kind: info.kind.as_str(),
                target: info.target,
                settled: Some(settled),
                unavailable: info.unavailable,
            });
        }
    }
    if json {
        return print_json(&Value::Array(rows.iter().map(Row::json).collect()));
    }
    print_table(&rows);
    Ok(())
}

fn print_table(rows: &[Row]) {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let state = match &r.settled {
                Some(Settled::Connected {
                    rtt_ms: Some(ms), ..
                }) => format!("connected {ms} ms"),
                _ => r.state().to_string(),
            };
            let notes = [r.message(), r.unavailable.clone()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("; ");
            vec![
                safe_line(&r.name).into_owned(),
                r.kind.to_string(),
                safe_line(&r.target).into_owned(),
                state,
                safe_line(&r.server().unwrap_or_else(|| "-".into())).into_owned(),
                safe_line(&notes).into_owned(),
            ]
        })
        .collect();
    print_columns(
        &["NAME", "KIND", "TARGET", "STATE", "SERVER", "NOTES"],
        &cells,
        60,
    );
}
