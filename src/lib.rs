//! Switchboard: a session engine for agents that talk to each other (the session tools of
//! OpenClaw's spec), with the command line and, later, a console and a gateway over one API.

/// Declares modules `pub` with the `internals` feature (integration tests and benches turn
/// it on through the self dev-dependency) and `pub(crate)` without it, so in a normal build
/// code outside this crate reaches the engine only through `api` and `engine::Engine`.
macro_rules! internal {
    ($(mod $name:ident;)*) => {$(
        #[cfg(feature = "internals")]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        pub(crate) mod $name;
    )*};
}

/// `pub use` with the `internals` feature, `pub(crate) use` without (see `internal!`).
macro_rules! internal_use {
    ($($path:tt)*) => {
        #[cfg(feature = "internals")]
        pub use $($path)*;
        #[cfg(not(feature = "internals"))]
        #[allow(unused_imports)]
        pub(crate) use $($path)*;
    };
}

/// A method `pub` with the `internals` feature and `pub(crate)` without it: the engine's
/// methods that hand out its internals (store, events, runs) stay out of front ends' reach.
macro_rules! internal_fn {
    ($(#[$attr:meta])* fn $($rest:tt)*) => {
        $(#[$attr])*
        #[cfg(feature = "internals")]
        pub fn $($rest)*
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        pub(crate) fn $($rest)*
    };
    ($(#[$attr:meta])* async fn $($rest:tt)*) => {
        $(#[$attr])*
        #[cfg(feature = "internals")]
        pub async fn $($rest)*
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        pub(crate) async fn $($rest)*
    };
}

pub mod agent;
pub mod api;
pub mod config;
pub mod demo;
pub mod engine;
pub mod json_size;
pub mod protocol;
pub mod remote;
pub mod server;
pub mod state_folder;
pub mod store;
internal! {
    mod store_sqlite;
}
pub mod text_safety;
pub mod tls_client;
pub mod tui;
