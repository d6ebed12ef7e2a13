//! Telling a store that another one committed: every write transaction ends with a
//! `NOTIFY` on one channel naming the store that wrote (delivered by the server at commit,
//! never for a rolled-back write), and each store keeps one connection that `LISTEN`s and
//! ticks its `external_changes` for notices from the others. The listener reconnects by
//! itself after the server restarts.

use std::time::Duration;

use tokio_postgres::AsyncMessage;

/// The channel every store notifies and listens on.
const CHANNEL: &str = "switchboard_changes";

/// How long the listener waits before reconnecting to a server that went away.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// The statements that end a write: the notice (its payload: `origin`, a UUID's hex digits
/// made here, so no quoting is needed, and `:r` while the store relays its events) and the
/// commit.
pub fn commit_sql(origin: &str, relaying: bool) -> String {
    let mark = if relaying { RELAYING } else { "" };
    format!("NOTIFY {CHANNEL}, '{origin}{mark}'; COMMIT")
}

/// The mark of a commit whose events are relayed (relay.rs): no tick for it.
const RELAYING: &str = ":r";

/// Listen for other stores' commits until `ticks` has no receiver left.
pub async fn listen(
    config: tokio_postgres::Config,
    origin: String,
    ticks: tokio::sync::watch::Sender<u64>,
    relay: crate::relay::Relay,
) {
    let mut expected = crate::relay::Expected::default();
    let mut first = true;
    while !ticks.is_closed() {
        match config.connect(tokio_postgres::NoTls).await {
            Ok((client, mut connection)) => {
                let (found, mut notices) = tokio::sync::mpsc::unbounded_channel();
                // The connection must be polled for the LISTEN to complete and for notices
                // to arrive; it ends when the server goes away.
                let pump = tokio::spawn(async move {
                    while let Some(message) =
                        std::future::poll_fn(|cx| connection.poll_message(cx)).await
                    {
                        match message {
                            Ok(AsyncMessage::Notification(n)) => {
                                let events = n.channel() == crate::relay::CHANNEL;
                                if found.send((events, n.payload().to_string())).is_err() {
                                    break;
                                }
                            }
                            Ok(_) => {}
                            Err(_) => break,
                        }
                    }
                });
                let listen = format!("LISTEN {CHANNEL}; LISTEN {}", crate::relay::CHANNEL);
                if let Err(e) = client.batch_execute(&listen).await {
                    tracing::warn!(error = %e, "cannot listen for other nodes' changes");
                } else {
                    // After a reconnect, what happened while not listening is unknown:
                    // count it as a change.
                    if !first {
                        ticks.send_modify(|n| *n += 1);
                        expected.reset(&relay);
                    }
                    first = false;
                    while let Some((events, payload)) = notices.recv().await {
                        if events {
                            expected.take(&relay, &payload);
                        } else if payload.split(':').next() != Some(origin.as_str())
                            && !payload.ends_with(RELAYING)
                        {
                            ticks.send_modify(|n| *n += 1);
                        }
                        if ticks.is_closed() {
                            break;
                        }
                    }
                }
                pump.abort();
            }
            Err(e) => tracing::debug!(error = %e, "change listener cannot connect; retrying"),
        }
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}
