//! Owns keeping the server's own filesystem paths (its state folder, its config file) from
//! connections that only read: a `readOnlyToken` client learns nothing of where the server
//! keeps its files (`switchboard.status`'s `attached`, a session row's `transcriptPath`, a
//! spawn announce quoting a transcript path, a storage error naming its database).
//!
//! **Choice:** paths are hidden from every connection without write scope (`operator.write`
//! or `operator.admin`), which is exactly what the read-only token grants; a connection
//! holding the gateway token is the owner, who may see them. **Where:** on the encoded text
//! of every frame such a connection is sent (its outbox), not method by method, so no answer
//! or event added later can leak one: each occurrence of a path (as JSON encodes it, as
//! given and canonicalised) becomes `<server path>`.

use std::path::PathBuf;

/// What replaces a hidden path.
pub const HIDDEN: &str = "<server path>";

/// The paths to hide, as they appear inside JSON text. Shorter than this, a "path" would
/// match ordinary text (`/`, `/tmp`); such a one is not hidden.
const MIN_NEEDLE: usize = 6;

#[derive(Debug, Clone, Default)]
pub struct PrivatePaths {
    /// Longest first, so a path that contains another is replaced whole.
    needles: Vec<String>,
}

impl PrivatePaths {
    /// Hide each of `paths`, as given and canonicalised (when it exists).
    pub fn new(paths: impl IntoIterator<Item = PathBuf>) -> PrivatePaths {
        let mut needles = Vec::new();
        for path in paths {
            let canonical = std::fs::canonicalize(&path).ok();
            for p in std::iter::once(path).chain(canonical) {
                // As JSON text: the frame holds `\"` and `\\` escaped.
                let Ok(quoted) = serde_json::to_string(&p.display().to_string()) else {
                    continue;
                };
                let inner = quoted[1..quoted.len() - 1].to_string();
                if inner.len() >= MIN_NEEDLE && !needles.contains(&inner) {
                    needles.push(inner);
                }
            }
        }
        needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
        PrivatePaths { needles }
    }

    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// `text` (an encoded frame) with every hidden path replaced by `HIDDEN`.
    pub fn scrub(&self, text: String) -> String {
        let mut text = text;
        for needle in &self.needles {
            if text.contains(needle.as_str()) {
                text = text.replace(needle.as_str(), HIDDEN);
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_go_as_json_encodes_them_and_the_json_stays_valid() {
        let p = PrivatePaths::new([PathBuf::from("/srv/sw \"state\""), PathBuf::from("/")]);
        let frame = serde_json::json!({
            "attached": "/srv/sw \"state\"",
            "transcriptPath": "/srv/sw \"state\"/switchboard.sqlite#abc",
            "other": "/",
        })
        .to_string();
        let out: serde_json::Value = serde_json::from_str(&p.scrub(frame)).unwrap();
        assert_eq!(out["attached"], HIDDEN);
        assert_eq!(
            out["transcriptPath"],
            format!("{HIDDEN}/switchboard.sqlite#abc")
        );
        // Too short to be told from text: left alone.
        assert_eq!(out["other"], "/");
    }
}
