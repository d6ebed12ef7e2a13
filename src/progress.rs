//! What `switchboard inject` shows on stderr while the work it set off runs: runs ending,
//! exchange rounds, how loops ended, announces, policy refusals and chain stops, one line
//! each, from the engine's event stream.

use switchboard_types::api::{AnnounceOutcome, EngineEvent, EventStream, RunStatus, StreamItem};

/// Print events as they come until `stop` fires, then whatever is still queued.
pub async fn print(
    mut events: EventStream,
    enabled: bool,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        let next = tokio::select! {
            e = events.next() => e,
            _ = &mut stop => {
                // Everything was sent before `stop`: take what is left without waiting.
                while let Some(item) = events.try_next() {
                    if !show_item(&item, enabled) {
                        return;
                    }
                }
                return;
            }
        };
        if !show_item(&next, enabled) {
            return;
        }
    }
}

/// Print one item of the stream; false once the stream has ended.
fn show_item(item: &StreamItem, enabled: bool) -> bool {
    match item {
        StreamItem::Event(e) => {
            if enabled && let Some(line) = describe(&e.event) {
                show(&line);
            }
            true
        }
        StreamItem::Missed(n) => {
            if enabled {
                // 0: a gateway connection dropped or could not stream; how many is unknown.
                if *n == 0 {
                    eprintln!("  … some events not shown (the gateway's stream was interrupted)");
                } else {
                    eprintln!(
                        "  … {} not shown",
                        switchboard_types::words::count(*n, "event")
                    );
                }
            }
            true
        }
        StreamItem::Closed => false,
    }
}

/// One progress line: it quotes agents' words, so it goes out escaped.
fn show(line: &str) {
    eprintln!("{}", switchboard_types::text_safety::safe_line(line));
}

/// Shorten a long text to one line for the progress log.
fn short(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > 100 {
        let cut: String = one_line.chars().take(99).collect();
        format!("{cut}…")
    } else {
        one_line
    }
}

fn describe(e: &EngineEvent) -> Option<String> {
    Some(match e {
        EngineEvent::ExchangeStarted {
            requester,
            target,
            message,
            hop,
            ..
        } => format!(
            "→ {requester} sends to {target} (hop {hop}): {}",
            short(message)
        ),
        EngineEvent::ExchangeRound {
            round,
            speaker,
            text,
            status,
            ..
        } => {
            if *status == RunStatus::Ok {
                format!("  round {round} · {speaker}: {}", short(text))
            } else {
                format!("  round {round} · {speaker}: ({status})")
            }
        }
        EngineEvent::ExchangeLoopEnded { reason, detail, .. } => {
            format!("  reply-back loop ended: {reason} ({detail})")
        }
        EngineEvent::Announce {
            outcome,
            text,
            detail,
            ..
        } => match text {
            Some(t) if *outcome == AnnounceOutcome::Delivered => {
                format!("  announce delivered: {} ({detail})", short(t))
            }
            _ => format!("  announce {outcome}: {detail}"),
        },
        EngineEvent::RunEnded {
            key, status, error, ..
        } if *status != RunStatus::Ok => format!(
            "  run in {key} ended {status}: {}",
            error.as_deref().unwrap_or("")
        ),
        EngineEvent::PolicyDecision {
            key,
            action,
            allowed: false,
            source,
            ..
        } => format!("  send policy of {key} refused {action} ({source})"),
        EngineEvent::ChainStopped {
            hops,
            max_hops,
            target,
            ..
        } => format!(
            "  chain stopped before {target}: {} > maxChainHops {max_hops}",
            switchboard_types::words::count(*hops, "send")
        ),
        EngineEvent::Delivery {
            channel, to, kind, ..
        } if *kind == switchboard_types::api::SendKind::Reply => {
            format!("  reply queued for {channel} {to}")
        }
        EngineEvent::Spawned {
            requester,
            child,
            task,
            ..
        } => format!("↳ {requester} spawned {child}: {}", short(task)),
        EngineEvent::SpawnEnded {
            child,
            outcome,
            runtime_ms,
            ..
        } => format!("  sub-agent {child} {outcome} ({runtime_ms} ms)"),
        EngineEvent::SpawnAnnounce {
            requester,
            outcome,
            detail,
            ..
        } => format!("  sub-agent announce to {requester}: {outcome} ({detail})"),
        EngineEvent::SessionArchived { key } => format!("  archived {key}"),
        _ => return None,
    })
}
