//! The `switchboard` binary: parse the command line, start logging, run the command, and
//! turn failures into a message on stderr and an exit code.

mod cli;
mod logging;
mod progress;

use std::io::Write;

/// mimalloc, not the system's allocator: building and dropping a page of OpenClaw-shaped
/// rows is mostly small allocations, and glibc's malloc/free were a third of the CPU a
/// `sessions.list` took (perf, issue 25; BENCHMARKS.md). `.cargo/config.toml` builds it to
/// commit memory as touched, which keeps `serve`'s footprint where glibc's was.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = cli::Cli::parse_args();
    if cli
        .command
        .as_ref()
        .is_some_and(|c| !matches!(c, cli::Command::Demo { .. } | cli::Command::Serve(_)))
    {
        quiet_broken_pipe();
    }
    // Logs belong to the state folder; a command that cannot write there reports that itself.
    // Only a command that writes may create the folder by logging into it.
    let state_dir = cli.state_dir();
    let log = if cli.state_use() == cli::StateUse::Writes
        || switchboard::state_folder::exists(&state_dir)
    {
        logging::init(&state_dir, cli.log_format)
    } else {
        None
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchboard: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(cli::run(cli, log));
    // The command is done: a task still running (a connection stuck writing to a client that
    // does not read) is dropped rather than waited for, so the process exits when it said.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    if let Err(err) = result {
        let code = err
            .downcast_ref::<cli::ExitError>()
            .map(|e| e.code)
            .unwrap_or(1);
        // Errors quote what the user or an agent wrote (keys, names, replies): never raw.
        let message = switchboard_types::text_safety::safe_text(&describe(&err)).into_owned();
        tracing::error!(error = %message, "command failed");
        // Not `eprintln!`: it panics when stderr is a terminal that has gone away.
        let _ = writeln!(std::io::stderr(), "switchboard: {message}");
        std::process::exit(code);
    }
}

/// A one-shot command whose output is piped into `head` should stop quietly when the reader
/// goes away, as other Unix tools do, instead of panicking in `println!`. Only for commands
/// that print and exit: a long-running front end keeps Rust's default (SIGPIPE ignored).
fn quiet_broken_pipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The error and its causes on one line, skipping a cause whose text the previous message
/// already quotes (many errors embed their source in their own message).
fn describe(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}
