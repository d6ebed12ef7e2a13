//! What `serve` tells an operator's tools: `/metrics` (a Prometheus recorder installed for
//! the process; the gateway and the store record through the `metrics` facade, and the
//! engine's runs, exchanges, announces and deliveries are counted here from its events), and
//! systemd's readiness protocol (`Type=notify`: READY once listening, STOPPING when asked to
//! stop, WATCHDOG pings while the engine answers).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use metrics::{counter, gauge};
use metrics_exporter_prometheus::PrometheusBuilder;

use switchboard_types::api::{EngineEvent, SessionsApi, StreamItem};

/// How often the recorder's histograms are trimmed to their window.
const UPKEEP: Duration = Duration::from_secs(10);

/// Install the process's recorder; what renders `/metrics`.
fn install() -> Result<switchboard_server::MetricsRender> {
    let recorder = PrometheusBuilder::new()
        .set_buckets(&[
            0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
            1.0, 2.5, 5.0,
        ])
        .context("metrics buckets")?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder)
        .map_err(|e| anyhow!("cannot install the metrics recorder: {e}"))?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(UPKEEP);
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(Arc::new(move || handle.render()))
}

/// `serve`'s metrics: the recorder installed, the engine's events counted, and the scrape
/// served on a port of its own when asked (until this is dropped).
pub(crate) struct Metrics {
    render: Option<switchboard_server::MetricsRender>,
    on_gateway_port: bool,
    _own_port: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Metrics {
    /// `--metrics` (`on_port`) and `--metrics-bind ADDR` (`bind`); neither: nothing recorded.
    pub(crate) async fn start(
        on_port: bool,
        bind: Option<&str>,
        api: &Arc<dyn SessionsApi>,
    ) -> Result<Metrics> {
        if !on_port && bind.is_none() {
            return Ok(Metrics {
                render: None,
                on_gateway_port: false,
                _own_port: None,
            });
        }
        let render = install()?;
        count_engine_events(api);
        let own_port = match bind {
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| super::usage(format!("--metrics-bind {addr}: {e}")))?;
                super::print::say(&format!(
                    "metrics on http://{}/metrics",
                    listener.local_addr()?
                ));
                let site = switchboard_server::Site {
                    started: std::time::Instant::now(),
                    api: api.clone(),
                    metrics: Some(render.clone()),
                    // Only the probes on this port.
                    hooks: switchboard_server::Hooks::default(),
                };
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                tokio::spawn(switchboard_server::serve_probes(
                    listener,
                    site,
                    async move {
                        let _ = stopped.await;
                    },
                ));
                Some(stop)
            }
            None => None,
        };
        Ok(Metrics {
            render: Some(render),
            on_gateway_port: on_port,
            _own_port: own_port,
        })
    }

    /// Record this node's lease every second while metrics are on: `switchboard_node_lease`
    /// (1 renewed, 0 lapsing, -1 lost; absent on a store without leases), how long since
    /// it was renewed, and the lanes held.
    pub(crate) fn watch_lease(&self, engine: switchboard_engine::Engine) {
        use switchboard_store::nodes::Standing;
        if self.render.is_none() || engine.standing() == Standing::Unleased {
            return;
        }
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            loop {
                every.tick().await;
                let (state, ago, lanes) = match engine.standing() {
                    Standing::Leased {
                        renewed_ms_ago,
                        lanes,
                    } => (1.0, renewed_ms_ago, lanes),
                    Standing::Lapsing { renewed_ms_ago } => (0.0, renewed_ms_ago, 0),
                    Standing::Lost | Standing::Unleased => (-1.0, 0, 0),
                };
                gauge!("switchboard_node_lease").set(state);
                gauge!("switchboard_node_lease_renewed_seconds_ago").set(ago as f64 / 1000.0);
                gauge!("switchboard_node_lanes_held").set(lanes as f64);
            }
        });
    }

    /// What renders `/metrics` on the gateway's own port (`None`: answered 404 there).
    pub(crate) fn on_gateway_port(&self) -> Option<switchboard_server::MetricsRender> {
        self.render.clone().filter(|_| self.on_gateway_port)
    }
}

/// Count the engine's outcomes from its events, for as long as the process runs.
fn count_engine_events(api: &Arc<dyn SessionsApi>) {
    let mut events = api.subscribe();
    tokio::spawn(async move {
        loop {
            match events.next().await {
                StreamItem::Event(e) => count(&e.event),
                StreamItem::Missed(n) => {
                    counter!("switchboard_engine_events_missed_total").increment(n.max(1));
                }
                StreamItem::Closed => return,
            }
        }
    });
}

fn count(e: &EngineEvent) {
    match e {
        EngineEvent::RunEnded { status, .. } => {
            counter!("switchboard_runs_total", "status" => status.as_str()).increment(1);
        }
        EngineEvent::ExchangeStarted { .. } => {
            counter!("switchboard_exchanges_started_total").increment(1);
        }
        EngineEvent::ExchangeEnded { reason, .. } => {
            counter!("switchboard_exchanges_ended_total", "reason" => reason.as_str()).increment(1);
        }
        EngineEvent::Announce { outcome, .. } | EngineEvent::SpawnAnnounce { outcome, .. } => {
            counter!("switchboard_announces_total", "outcome" => outcome.as_str()).increment(1);
        }
        EngineEvent::Delivery { .. } => counter!("switchboard_deliveries_total").increment(1),
        EngineEvent::Spawned { .. } => counter!("switchboard_spawns_total").increment(1),
        EngineEvent::MessageAppended { .. } => {
            counter!("switchboard_messages_total").increment(1);
        }
        _ => {}
    }
}

/// systemd's readiness protocol, when the process runs under it (`NOTIFY_SOCKET` set);
/// otherwise every call does nothing.
pub(crate) struct Supervisor {
    watchdog: Option<tokio::task::JoinHandle<()>>,
}

impl Supervisor {
    /// Ready: listening, and (with `WatchdogSec=`) pinging at half the interval for as long
    /// as the engine answers; a stuck engine stops the pings and systemd restarts it.
    pub(crate) fn ready(api: Arc<dyn SessionsApi>) -> Supervisor {
        use sd_notify::NotifyState;
        if let Err(e) = sd_notify::notify(&[NotifyState::Ready]) {
            tracing::warn!(error = %e, "cannot tell systemd the gateway is ready");
        }
        let watchdog = sd_notify::watchdog_enabled().map(|interval| {
            let every = (interval / 2).max(Duration::from_millis(100));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    if tokio::time::timeout(every, api.status())
                        .await
                        .is_ok_and(|r| r.is_ok())
                    {
                        let _ = sd_notify::notify(&[NotifyState::Watchdog]);
                    } else {
                        tracing::warn!("the engine did not answer: no watchdog ping");
                    }
                }
            })
        });
        Supervisor { watchdog }
    }

    /// Stopping: the supervisor waits for the exit instead of counting it as a crash.
    pub(crate) fn stopping(self) {
        if let Some(w) = self.watchdog {
            w.abort();
        }
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    }
}
