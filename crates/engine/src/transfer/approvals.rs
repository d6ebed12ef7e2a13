//! OpenClaw's approved direct-message senders (its pairing store,
//! `credentials/<channel>-allowFrom.json`, or `<channel>-<account>-allowFrom.json`), brought
//! in as approved pairings, so a sender the owner let in there is answered here too under
//! `dmPolicy: "pairing"`. Read like every import source (inside the folder, no symlinks),
//! bounded in size and entries; ids only (a username cannot be matched to a sender id: it is
//! named in a warning, for `allowFrom`).

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use super::source::{Refused, SourceRoot};
use super::{ImportReport, TransferError, io_err};
use crate::Engine;

/// The channels whose senders pairing knows.
const CHANNELS: [&str; 2] = ["telegram", "discord"];

/// The largest allow-list file read.
const MAX_FILE: u64 = 1024 * 1024;

/// The most entries taken from one file.
const MAX_ENTRIES: usize = 10_000;

impl Engine {
    /// Approve the senders of OpenClaw's allow-list files under `dir/credentials`.
    pub(super) async fn import_approvals(
        &self,
        dir: &Path,
        root: &SourceRoot,
        report: &mut ImportReport,
    ) -> Result<(), TransferError> {
        let folder = dir.join("credentials");
        let Ok(entries) = std::fs::read_dir(&folder) else {
            return Ok(());
        };
        let mut files: Vec<(String, std::path::PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let channel = channel_of(&name)?;
                Some((channel.to_string(), e.path()))
            })
            .collect();
        files.sort();
        let now = switchboard_types::api::time::now_ms();
        for (channel, path) in files {
            let Some(senders) = read_senders(root, &path, report)? else {
                continue;
            };
            for sender in senders {
                if self
                    .store()
                    .backend()
                    .approve_sender(&channel, &sender, now)
                    .await?
                {
                    *report.approvals.entry(channel.clone()).or_default() += 1;
                }
            }
        }
        Ok(())
    }
}

/// The channel an allow-list file is for (`telegram-allowFrom.json`,
/// `telegram-work-allowFrom.json`), if pairing knows it.
fn channel_of(name: &str) -> Option<&'static str> {
    let stem = name.strip_suffix("-allowFrom.json")?;
    CHANNELS
        .into_iter()
        .find(|c| stem == *c || stem.strip_prefix(c).is_some_and(|r| r.starts_with('-')))
}

/// The sender ids of one file (`None`: skipped, said in a warning).
fn read_senders(
    root: &SourceRoot,
    path: &Path,
    report: &mut ImportReport,
) -> Result<Option<Vec<String>>, TransferError> {
    let shown = path.display();
    let (file, meta) = match root.open(path).map_err(io_err("read", path))? {
        Ok(opened) => opened,
        Err(Refused::Missing) => return Ok(None),
        Err(Refused::Skip(_, why)) => {
            report.warnings.push(format!("{shown} not read: {why}"));
            return Ok(None);
        }
    };
    if meta.len() > MAX_FILE {
        report.warnings.push(format!(
            "{shown} not read: {} bytes, more than an allow-list holds ({MAX_FILE} at most)",
            meta.len()
        ));
        return Ok(None);
    }
    let mut text = String::new();
    if file.take(MAX_FILE).read_to_string(&mut text).is_err() {
        report.warnings.push(format!("{shown} not read: not UTF-8 text"));
        return Ok(None);
    }
    let value: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            report.warnings.push(format!("{shown} not read: not JSON ({e})"));
            return Ok(None);
        }
    };
    // A list, or an object holding it (`{"version": 1, "allowFrom": [...]}`).
    let Some(list) = value
        .as_array()
        .or_else(|| value.get("allowFrom").and_then(Value::as_array))
    else {
        report.warnings.push(format!(
            "{shown} not read: expected a list of sender ids (or {{\"allowFrom\": [...]}})"
        ));
        return Ok(None);
    };
    let mut ids = Vec::new();
    let mut names = Vec::new();
    for entry in list.iter().take(MAX_ENTRIES) {
        let text = match entry {
            Value::String(s) => s.trim().to_string(),
            Value::Number(n) => n.to_string(),
            _ => continue,
        };
        if !text.is_empty() && text.len() <= 32 && text.bytes().all(|b| b.is_ascii_digit()) {
            ids.push(text);
        } else if !text.is_empty() && names.len() < 5 {
            names.push(switchboard_types::text_safety::safe_line(&text).into_owned());
        }
    }
    if list.len() > MAX_ENTRIES {
        report.warnings.push(format!(
            "{shown}: only the first {MAX_ENTRIES} entries were read"
        ));
    }
    if !names.is_empty() {
        report.warnings.push(format!(
            "{shown}: entries that are not sender ids ({}) were not approved; put them in \
             channels.<channel>.allowFrom",
            names.join(", ")
        ));
    }
    Ok(Some(ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list_files_name_their_channel() {
        assert_eq!(channel_of("telegram-allowFrom.json"), Some("telegram"));
        assert_eq!(channel_of("telegram-work-allowFrom.json"), Some("telegram"));
        assert_eq!(channel_of("discord-allowFrom.json"), Some("discord"));
        assert_eq!(channel_of("whatsapp-allowFrom.json"), None);
        assert_eq!(channel_of("telegramx-allowFrom.json"), None);
        assert_eq!(channel_of("telegram-pairing.json"), None);
    }
}
