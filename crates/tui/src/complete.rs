//! Tab completion in the composer: slash commands, and in their arguments session keys
//! (`/ask`, `/new`, `/status`, `/abort`) and agent ids (`/spawn --agent`). Pure: given the
//! draft up to the cursor and what is known, it says what to put in place of the word being
//! typed and which candidates to show.

/// The slash commands, with their arguments as the help and the errors write them.
pub const COMMANDS: &[(&str, &str)] = &[
    ("/send", "on|off|inherit"),
    ("/spawn", "[--agent <id>] <task>"),
    ("/ask", "<session> <message>"),
    ("/status", "[session]"),
    ("/abort", "[session]"),
    ("/agents", ""),
    ("/new", "<session> [message]"),
    ("/help", ""),
];

/// Every command with its usage, for the "unknown command" message and the help.
pub fn usage_list() -> String {
    COMMANDS
        .iter()
        .map(|(c, a)| {
            if a.is_empty() {
                c.to_string()
            } else {
                format!("{c} {a}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What Tab does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// How many characters before the cursor (the word typed) to replace.
    pub word_chars: usize,
    /// The replacement, when there is one that extends what was typed.
    pub replace: Option<String>,
    /// Everything that matched, when more than one did.
    pub candidates: Vec<String>,
}

/// What the word at the cursor can complete to, or `None` when there is nothing to complete
/// there (then Tab leaves the composer).
pub fn complete(before_cursor: &str, keys: &[&str], agents: &[&str]) -> Option<Completion> {
    let rest = before_cursor.strip_prefix('/')?;
    let word_start = before_cursor
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map(|(i, c)| i + c.len_utf8())
        .unwrap_or(0);
    let word = &before_cursor[word_start..];
    if word_start == 0 {
        let names: Vec<String> = COMMANDS
            .iter()
            .map(|(c, a)| {
                // A command that takes arguments completes with the space before them.
                if a.is_empty() {
                    c.to_string()
                } else {
                    format!("{c} ")
                }
            })
            .collect();
        return choose(word, names.iter().filter(|n| n.starts_with(word)).cloned());
    }
    let cmd = rest.split_whitespace().next().unwrap_or("");
    // The arguments already typed before the word at the cursor.
    let done: Vec<&str> = before_cursor[..word_start]
        .split_whitespace()
        .skip(1)
        .collect();
    match (cmd, done.as_slice()) {
        ("ask" | "new" | "status" | "abort", []) => {
            let found = keys.iter().filter(|k| key_matches(k, word)).map(|k| {
                // The session argument is a whole word: a unique key ends it.
                k.to_string()
            });
            choose(word, found.map(|k| format!("{k} ")))
        }
        ("spawn", [.., "--agent"]) => choose(
            word,
            agents
                .iter()
                .filter(|a| a.starts_with(word))
                .map(|a| format!("{a} ")),
        ),
        ("spawn", []) if word.starts_with('-') && "--agent".starts_with(word) => {
            choose(word, std::iter::once("--agent ".to_string()))
        }
        ("send", []) => choose(
            word,
            ["on", "off", "inherit"]
                .iter()
                .filter(|o| o.starts_with(word))
                .map(|o| o.to_string()),
        ),
        _ => None,
    }
}

/// A session key matches what was typed by its start, or by the start of any of its
/// `:`-separated parts (typing `tele` finds `agent:main:telegram:direct:1`).
pub fn key_matches(key: &str, typed: &str) -> bool {
    if key.starts_with(typed) {
        return true;
    }
    key.match_indices(':')
        .any(|(i, _)| key[i + 1..].starts_with(typed))
}

/// One match: take it. Several: the longest common start when it still holds what was typed
/// and says more, and show them all. None: nothing to complete.
fn choose(word: &str, found: impl Iterator<Item = String>) -> Option<Completion> {
    let mut found: Vec<String> = found.collect();
    found.sort();
    found.dedup();
    let word_chars = word.chars().count();
    match found.len() {
        0 => None,
        1 => Some(Completion {
            word_chars,
            replace: found.pop(),
            candidates: Vec::new(),
        }),
        _ => {
            let common = common_prefix(&found);
            let replace = (common.len() > word.len() && common.contains(word)).then_some(common);
            let candidates = found.iter().map(|c| c.trim_end().to_string()).collect();
            Some(Completion {
                word_chars,
                replace,
                candidates,
            })
        }
    }
}

fn common_prefix(all: &[String]) -> String {
    let Some(first) = all.first() else {
        return String::new();
    };
    let mut end = first.len();
    for s in &all[1..] {
        end = first
            .char_indices()
            .zip(s.chars())
            .take_while(|((_, a), b)| a == b)
            .last()
            .map(|((i, a), _)| i + a.len_utf8())
            .unwrap_or(0)
            .min(end);
    }
    first[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &[&str] = &[
        "agent:main:main",
        "agent:main:telegram:direct:1234",
        "agent:main:telegram:direct:5678",
        "agent:work:discord:group:dev",
    ];

    #[test]
    fn commands_complete_by_prefix() {
        let c = complete("/st", KEYS, &[]).expect("a command");
        assert_eq!(c.replace.as_deref(), Some("/status "));
        let c = complete("/s", KEYS, &[]).expect("several");
        assert_eq!(c.candidates, vec!["/send", "/spawn", "/status"]);
        assert_eq!(c.replace, None);
        assert!(complete("hello", KEYS, &[]).is_none());
    }

    #[test]
    fn keys_complete_by_any_part() {
        let c = complete("/ask disc", KEYS, &[]).expect("one key");
        assert_eq!(c.replace.as_deref(), Some("agent:work:discord:group:dev "));
        assert_eq!(c.word_chars, 4);
        let c = complete("/ask tele", KEYS, &[]).expect("two keys");
        assert_eq!(c.replace.as_deref(), Some("agent:main:telegram:direct:"));
        assert_eq!(c.candidates.len(), 2);
        // The message after the key is not completed.
        assert!(complete("/ask agent:main:main tele", KEYS, &[]).is_none());
    }

    #[test]
    fn agents_complete_after_the_flag() {
        let c = complete("/spawn --agent w", KEYS, &["main", "work"]).expect("work");
        assert_eq!(c.replace.as_deref(), Some("work "));
        let c = complete("/spawn --ag", KEYS, &[]).expect("the flag");
        assert_eq!(c.replace.as_deref(), Some("--agent "));
    }

    #[test]
    fn common_prefix_respects_characters() {
        assert_eq!(common_prefix(&["äb".into(), "äc".into()]), "ä");
        assert_eq!(common_prefix(&["x".into(), "y".into()]), "");
    }
}
