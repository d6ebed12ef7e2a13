//! Work that moves between sessions: inbound messages, runs of an agent on per-session
//! lanes, agent-to-agent exchanges, sub-agents, and outbound delivery.

internal! {
    mod a2a;
    mod chain;
    mod delivery;
    mod history_cache;
    mod inbound;
    mod lane;
    mod runs;
    mod spawn;
}
