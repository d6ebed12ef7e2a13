//! Several engines on one store (docs/ARCHITECTURE.md, "Several nodes"): this engine's
//! events relayed to the others and theirs to its subscribers, and the watch that takes a
//! dead engine's work over (its runs and exchanges closed, its sub-agents' announces and
//! archive timers resumed here), each dead engine by exactly one survivor.

use std::sync::{Arc, Weak};
use std::time::Duration;

use switchboard_store::nodes::{Relayed, Standing};

use crate::Engine;
use crate::context::Context;
use crate::events::EngineEvent;
use crate::instance::Instance;
use crate::spawn::Spawns;
use crate::tools::Tools;
use switchboard_types::api::time::now_ms;

/// How often the watch looks for dead engines.
const WATCH: Duration = Duration::from_secs(1);

/// Relay this engine's events to the other nodes and theirs to this engine's subscribers
/// (a gap becomes `ExternalChange`: readers read again). Nothing for a store that relays
/// nothing.
pub(crate) fn relay(engine: &Engine) {
    let store = engine.store().backend().clone();
    let Some(mut inbox) = store.relayed() else {
        return;
    };
    let outgoing = store.clone();
    engine
        .events()
        .set_outlet(Box::new(move |event| outgoing.relay(vec![event.clone()])));
    let events = engine.events().clone();
    // Not tracked: it lives as long as the store's relay and is no one's work to wait for.
    tokio::spawn(async move {
        while let Some(news) = inbox.recv().await {
            match news {
                Relayed::Event(event) => events.emit_relayed(event),
                Relayed::Gap => events.emit_relayed(EngineEvent::ExternalChange),
            }
        }
    });
}

/// Watch for dead engines while this one lives (a store with leases only).
pub(crate) fn watch(engine: &Engine) {
    if engine.store().backend().standing() == Standing::Unleased {
        return;
    }
    let ctx = Arc::downgrade(engine.context());
    let spawns = Arc::downgrade(engine.spawn_service());
    let tools = Arc::downgrade(engine.tool_service());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(WATCH);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if !look(&ctx, &spawns, &tools).await {
                return;
            }
        }
    });
}

/// One look: take over the dead, then finish what they left. False once the engine is gone.
async fn look(ctx: &Weak<Context>, spawns: &Weak<Spawns>, tools: &Weak<Tools>) -> bool {
    let (Some(ctx), Some(spawns), Some(tools)) = (ctx.upgrade(), spawns.upgrade(), tools.upgrade())
    else {
        return false;
    };
    let dead_here = Instance::dead_here(ctx.state_dir());
    let taken = match ctx
        .store()
        .backend()
        .take_over_dead(now_ms(), dead_here.clone())
        .await
    {
        Ok(taken) => taken,
        Err(e) => {
            tracing::debug!(error = %e, "looking for dead nodes failed");
            return true;
        }
    };
    // Lock files here of engines with nothing left (taken over now or by another node).
    let mut done = Vec::new();
    for owner in dead_here {
        if ctx.store().backend().owner_alive(&owner).await == Some(false) {
            done.push(owner);
        }
    }
    Instance::sweep_these(ctx.state_dir(), &done);
    if taken.is_empty() {
        return true;
    }
    for dead in taken {
        tracing::warn!(
            owner = %dead.owner,
            runs = dead.runs.len(),
            exchanges = dead.flows.len(),
            "took over a stopped node's work"
        );
        if !dead.runs.is_empty() || !dead.flows.is_empty() {
            ctx.events().emit(EngineEvent::Recovered {
                runs: dead.runs.into_iter().map(|r| r.run_id).collect(),
                exchanges: dead.flows,
            });
        }
    }
    let host: Arc<dyn crate::tools::context::ToolHost> = tools;
    if let Err(e) = spawns.resume(&host).await {
        tracing::warn!(error = %e, "resuming a stopped node's sub-agents failed");
    }
    true
}
