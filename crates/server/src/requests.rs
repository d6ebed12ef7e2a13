//! One request turned into the work that answers it, for a connection: the scope check,
//! the subscriptions (which change what the connection's event tasks send), `chat.send` and
//! `agent` (idempotency, and `chat`/`agent` events for the sessions sent into), and every
//! other method through `methods::call`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::connection::Shared;
use super::events::{Interest, Subscriptions, agent_of};
use super::methods::{self, api_failure, error, invalid, params, webchat};
use super::outbox::Outbox;
use super::slash;
use switchboard_protocol::ErrorShape;
use switchboard_protocol::switchboard;
use switchboard_types::api::{KeyPurpose, RunStatus, SendRequest, Sender};

/// A request's work: answers through the outbox when it ends.
pub type Work<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// What a connection's requests share.
pub struct Ctx {
    pub shared: Arc<Shared>,
    pub outbox: Arc<Outbox>,
    pub interest: Arc<Mutex<Interest>>,
    pub conn_id: String,
    /// `connect.caps` held `switchboard.v1`.
    pub switchboard: bool,
    /// The connection was granted `operator.write` (or admin).
    pub write: bool,
    /// The connection was granted `operator.admin`: its messages are the owner's, so its
    /// slash commands (`/send`, `/status`, `/abort`, `/new`) are handled, not sent on.
    pub owner: bool,
    /// The requests in flight of this connection's token, across its connections.
    pub token_requests: Arc<tokio::sync::Semaphore>,
}

/// The longest an `agent` call waits for its run before its second answer says `timeout`.
const AGENT_WAIT: Duration = Duration::from_secs(10 * 60);

/// The work for one request, or `None` when it was answered on the spot.
pub fn dispatch<'a>(
    ctx: &'a Ctx,
    subs: &mut Subscriptions,
    id: String,
    method: String,
    raw: Option<Value>,
) -> Option<Work<'a>> {
    // Every request's work holds one of its token's places until it is answered or
    // dropped (its connection ended), so no token can have endless work going at once.
    let Ok(place) = ctx.token_requests.clone().try_acquire_owned() else {
        let busy = error(
            "UNAVAILABLE",
            format!(
                "too many requests in flight for this token (at most {}); retry when some are \
                 answered",
                super::connection::MAX_IN_FLIGHT_PER_TOKEN
            ),
        );
        let _ = ctx.outbox.response(id, Err(busy));
        return None;
    };
    let work = dispatch_inner(ctx, subs, id, method, raw)?;
    Some(Box::pin(async move {
        let _place = place;
        work.await;
    }))
}

fn dispatch_inner<'a>(
    ctx: &'a Ctx,
    subs: &mut Subscriptions,
    id: String,
    method: String,
    raw: Option<Value>,
) -> Option<Work<'a>> {
    if !ctx.write && methods::is_write(&method) {
        let refused = error(
            switchboard::code::FORBIDDEN,
            "missing scope: operator.write",
        );
        let _ = ctx.outbox.response(id, Err(refused));
        return None;
    }
    let answer = |id: String, outcome: Result<Value, ErrorShape>| {
        if let Err(e) = &outcome {
            tracing::debug!(conn_id = %ctx.conn_id, code = %e.code, "request failed");
        }
        let _ = ctx.outbox.response(id, outcome);
    };
    match method.as_str() {
        switchboard::method::SUBSCRIBE => {
            if ctx.switchboard {
                subs.subscribe_switchboard(&ctx.shared.api, &ctx.outbox, id);
            } else {
                answer(
                    id,
                    Err(invalid(format!(
                        "{method} needs the `{}` capability in connect.caps",
                        switchboard::CAP
                    ))),
                );
            }
            None
        }
        "sessions.subscribe" | "sessions.unsubscribe" => {
            let on = method == "sessions.subscribe";
            lock(&ctx.interest).set_sessions(on);
            answer(id, Ok(json!({"subscribed": on})));
            None
        }
        "sessions.messages.subscribe" | "sessions.messages.unsubscribe" => {
            Some(Box::pin(async move {
                let on = method == "sessions.messages.subscribe";
                let outcome = follow_messages(ctx, &method, raw, on).await;
                answer(id, outcome);
            }))
        }
        "chat.send" => Some(Box::pin(async move {
            match params::<SendParams>(&method, raw) {
                Ok(p) => chat_send(ctx, id, p).await,
                Err(e) => answer(id, Err(e)),
            }
        })),
        "agent.wait" => Some(Box::pin(async move {
            match params::<methods::WaitParams>(&method, raw) {
                Ok(p) => {
                    // Its end's events go out before the answer, as OpenClaw sends them
                    // (only for a run this connection was told had started).
                    let end = lock(&ctx.interest).end_of(&p.run_id, false);
                    let outcome = methods::agent_wait(&ctx.shared.api, p).await;
                    after_end_events(end).await;
                    answer(id, outcome);
                }
                Err(e) => answer(id, Err(e)),
            }
        })),
        "agent" => Some(Box::pin(async move {
            match params::<AgentParams>(&method, raw) {
                Ok(p) => agent(ctx, id, p).await,
                Err(e) => answer(id, Err(e)),
            }
        })),
        "sessions.list" => Some(Box::pin(async move {
            match methods::sessions_list_answer(&ctx.shared.api, &ctx.shared.rows, raw).await {
                Ok(methods::Listed::Rendered(payload)) => {
                    let _ = ctx.outbox.response_rendered(id, payload);
                }
                Ok(methods::Listed::Value(v)) => answer(id, Ok(v)),
                Err(e) => answer(id, Err(e)),
            }
        })),
        "status" => Some(Box::pin(async move {
            let outcome = methods::call(&ctx.shared.api, &method, raw, ctx.shared.max_payload)
                .await
                .map(|mut v| {
                    v["gateway"] = gateway_status(&ctx.shared);
                    v
                });
            answer(id, outcome);
        })),
        _ => Some(Box::pin(async move {
            let outcome =
                methods::call(&ctx.shared.api, &method, raw, ctx.shared.max_payload).await;
            answer(id, outcome);
        })),
    }
}

/// What the gateway holds now, for operators (and the tests that check it gives back what
/// a client took): connections past their handshake, requests being answered, and the
/// bytes queued for clients to read.
fn gateway_status(shared: &Shared) -> Value {
    use std::sync::atomic::Ordering;
    let max = super::connection::MAX_IN_FLIGHT_PER_TOKEN;
    let in_flight = (max - shared.full_token_requests.available_permits())
        + (max - shared.read_only_token_requests.available_permits());
    json!({
        "connections": shared.connected.load(Ordering::SeqCst),
        "requestsInFlight": in_flight,
        "queuedBytes": shared.budget.used(),
    })
}

fn lock(interest: &Mutex<Interest>) -> std::sync::MutexGuard<'_, Interest> {
    interest.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Deserialize)]
struct KeyParams {
    key: String,
}

async fn follow_messages(
    ctx: &Ctx,
    method: &str,
    raw: Option<Value>,
    on: bool,
) -> Result<Value, ErrorShape> {
    let p: KeyParams = params(method, raw)?;
    // A session that does not exist yet may be followed: its first message will show.
    let key = ctx
        .shared
        .api
        .resolve_key(&p.key, KeyPurpose::Inbound)
        .await
        .map_err(api_failure)?
        .key;
    let mut interest = lock(&ctx.interest);
    if on {
        if !interest.follow_messages(&key) {
            return Err(invalid("too many sessions followed on this connection"));
        }
    } else {
        interest.unfollow_messages(&key);
    }
    Ok(json!({"subscribed": on, "key": key}))
}

// OpenClaw's clients send fields not modelled here (`deliver`, `queueMode`, …): accepted.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendParams {
    session_key: String,
    message: String,
    idempotency_key: Option<String>,
}

/// What a send set off, as `chat.send` and `agent` answer it.
struct Accepted {
    run_id: Option<String>,
    key: String,
    /// The engine's answer to an owner command (no run).
    command_reply: Option<String>,
}

/// Records the message and follows its session's runs. A repeat of `idempotency_key` is
/// answered by the engine with the first call's run (restarts included; a key reused for
/// another session or message is refused there), so every front end gets the same rule.
///
/// Nothing here may wait before `api.send` has taken the message's place in its session's
/// line: the connection polls this once before reading the next request, and that first
/// poll is what keeps pipelined sends in the order they arrived. (`resolve_key` on the
/// engine answers without waiting.)
async fn send_once(
    ctx: &Ctx,
    raw_key: &str,
    text: String,
    idempotency_key: Option<String>,
) -> Result<Accepted, ErrorShape> {
    let api = &ctx.shared.api;
    let key = api
        .resolve_key(raw_key, KeyPurpose::Inbound)
        .await
        .map_err(api_failure)?
        .key;
    // Before the send, so not even a run that ends at once is missed.
    lock(&ctx.interest).sent_into(&key);
    let from = if ctx.owner { operator() } else { webchat() };
    let receipt = api
        .send(SendRequest {
            key,
            text,
            from,
            idempotency_key,
        })
        .await
        .map_err(api_failure)?;
    Ok(Accepted {
        run_id: receipt.run_id,
        key: receipt.key,
        command_reply: receipt.command_reply,
    })
}

/// An owner's messages come from an operator's client on webchat.
fn operator() -> Sender {
    Sender {
        owner: true,
        ..webchat()
    }
}

async fn chat_send(ctx: &Ctx, id: String, p: SendParams) {
    // The run id a command's reply goes out under: the client's, as OpenClaw uses it.
    let command_run = p
        .idempotency_key
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let outcome = match slash::parse(&p.message).filter(|_| ctx.owner) {
        Some(command) => gateway_command(ctx, &p.session_key, command).await,
        None => send_once(ctx, &p.session_key, p.message, p.idempotency_key).await,
    };
    let a = match outcome {
        Ok(a) => a,
        Err(e) => {
            let _ = ctx.outbox.response(id, Err(e));
            return;
        }
    };
    let Some(reply) = a.command_reply else {
        let _ = ctx
            .outbox
            .response(id, Ok(json!({"runId": a.run_id, "status": "started"})));
        return;
    };
    // An owner command is answered without a run: as OpenClaw does, `started` under the
    // client's run id, then the reply as that run's final `chat` event (their TUI shows a
    // reply from the events, not from the answer; `reply` is ours, for other clients).
    let started = json!({"runId": command_run, "status": "started", "reply": reply});
    if ctx.outbox.response(id, Ok(started)).is_err() {
        return;
    }
    let mut event = json!({
        "runId": command_run, "sessionKey": a.key, "seq": 1, "state": "final",
        "message": {"role": "assistant", "content": [{"type": "text", "text": reply}],
                    "timestamp": chrono::Utc::now().timestamp_millis()},
    });
    if let Some(agent) = agent_of(&a.key) {
        event["agentId"] = json!(agent);
    }
    let _ = ctx.outbox.event(super::events::CHAT, event);
}

/// A slash command the gateway answers itself (`slash.rs`).
async fn gateway_command(
    ctx: &Ctx,
    raw_key: &str,
    command: slash::Slash,
) -> Result<Accepted, ErrorShape> {
    let key = ctx
        .shared
        .api
        .resolve_key(raw_key, KeyPurpose::Inbound)
        .await
        .map_err(api_failure)?
        .key;
    let reply = slash::answer(&ctx.shared.api, &key, command).await?;
    Ok(Accepted {
        run_id: None,
        key,
        command_reply: Some(reply),
    })
}

/// How long an answer waits for its run's end events to be queued first: they follow the
/// run's end within milliseconds; this only bounds a stream that lost them.
const END_EVENTS_WAIT: Duration = Duration::from_secs(5);

/// Waits (bounded) until the connection's event task has queued the run's end events.
async fn after_end_events(end: Option<tokio::sync::oneshot::Receiver<()>>) {
    if let Some(end) = end {
        let _ = tokio::time::timeout(END_EVENTS_WAIT, end).await;
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AgentParams {
    message: String,
    session_key: Option<String>,
    agent_id: Option<String>,
    idempotency_key: Option<String>,
}

/// `agent`: two answers with the request's id, `accepted` at once and the run's outcome
/// when it ends, as OpenClaw sends them.
async fn agent(ctx: &Ctx, id: String, p: AgentParams) {
    let raw_key = match (p.session_key, &p.agent_id) {
        (Some(k), _) => k,
        (None, Some(agent)) => format!("agent:{agent}:main"),
        (None, None) => "main".to_string(),
    };
    let accepted = match send_once(ctx, &raw_key, p.message, p.idempotency_key).await {
        Ok(a) => a,
        Err(e) => {
            let _ = ctx.outbox.response(id, Err(e));
            return;
        }
    };
    let agent_id = accepted
        .key
        .split(':')
        .nth(1)
        .map(str::to_string)
        .or(p.agent_id);
    let Some(run_id) = accepted.run_id else {
        // An owner command: answered by the engine at once, no run to wait for.
        let text = accepted.command_reply.unwrap_or_default();
        let _ = ctx.outbox.response(
            id,
            Ok(
                json!({"runId": null, "sessionKey": accepted.key, "status": "ok",
                      "summary": "completed", "result": {"payloads": [{"text": text}]}}),
            ),
        );
        return;
    };
    let first = json!({
        "runId": run_id, "sessionKey": accepted.key, "agentId": agent_id,
        "status": "accepted", "acceptedAt": chrono::Utc::now().timestamp_millis(),
    });
    // Asked before the wait, so an end that comes at once is not missed.
    let end = lock(&ctx.interest).end_of(&run_id, true);
    if ctx.outbox.response(id.clone(), Ok(first)).is_err() {
        return;
    }
    let ended = ctx.shared.api.wait_run(&run_id, AGENT_WAIT).await;
    // As OpenClaw orders them: `lifecycle end` and `chat final` before this answer.
    if matches!(&ended, Ok(r) if r.status != RunStatus::Running) {
        after_end_events(end).await;
    }
    let second = match ended {
        Ok(r) if r.status == RunStatus::Ok => Ok(json!({
            "runId": run_id, "status": "ok", "summary": "completed",
            "result": {"payloads": [{"text": r.reply}]},
        })),
        Ok(r) => {
            let status = if r.status == RunStatus::Running {
                "timeout"
            } else {
                "error"
            };
            Ok(json!({
                "runId": run_id, "status": status,
                "summary": r.error.unwrap_or_else(|| r.status.to_string()),
            }))
        }
        Err(e) => Err(api_failure(e)),
    };
    let _ = ctx.outbox.response(id, second);
}
