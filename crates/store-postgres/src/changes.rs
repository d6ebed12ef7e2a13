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
/// made here, so no quoting is needed) and the commit.
pub fn commit_sql(origin: &str) -> String {
    format!("NOTIFY {CHANNEL}, '{origin}'; COMMIT")
}

/// Listen for other stores' commits until `ticks` has no receiver left.
pub async fn listen(
    config: tokio_postgres::Config,
    origin: String,
    ticks: tokio::sync::watch::Sender<u64>,
) {
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
                                if found.send(n.payload().to_string()).is_err() {
                                    break;
                                }
                            }
                            Ok(_) => {}
                            Err(_) => break,
                        }
                    }
                });
                if let Err(e) = client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
                    tracing::warn!(error = %e, "cannot listen for other nodes' changes");
                } else {
                    // After a reconnect, what happened while not listening is unknown:
                    // count it as a change.
                    if !first {
                        ticks.send_modify(|n| *n += 1);
                    }
                    first = false;
                    while let Some(from) = notices.recv().await {
                        if from != origin {
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
