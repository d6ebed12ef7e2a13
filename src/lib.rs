//! Switchboard: a session engine for agents that talk to each other (the session tools of
//! OpenClaw's spec), with the command line and, later, a console and a gateway over one API.

pub mod agent;
pub mod api;
pub mod config;
pub mod demo;
pub mod engine;
pub mod text_safety;
pub mod tui;
