//! What the benches that run a real `serve` share: its address, read from the listening line
//! it prints (its stderr drained after, so the pipe never fills), and its resident memory.

use std::io::{BufRead, BufReader};
use std::process::Child;

/// The `host:port` `child` (a `serve` spawned with stderr piped) listens on.
pub fn listening_addr(child: &mut Child) -> String {
    let err = child.stderr.take().expect("serve's stderr is piped");
    let mut lines = BufReader::new(err).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("serve printed where it listens")
            .expect("stderr");
        if let Some(rest) = line.split("listening on ws://").nth(1) {
            break rest.trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    addr
}

/// Resident memory of process `pid`, in MiB (0 when it cannot be read).
pub fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}
