//! Tab completion of commands, in the composer (`/send …`) and on the `:` command line
//! (`:traffic`), from one table: the command names, and in their arguments session keys
//! (`ask`, `new`, `status`, `abort`), agent ids (`spawn --agent`) and `send`'s settings.
//! Pure: given the text up to the cursor and what is known, it says what to put in place of
//! the word being typed and which candidates to show.

/// Where a command is typed: after `/` in the composer, after `:` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sigil {
    Slash,
    Colon,
}

impl Sigil {
    pub fn char(self) -> char {
        match self {
            Sigil::Slash => '/',
            Sigil::Colon => ':',
        }
    }
}

/// Where a command can be typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Typed {
    /// In the composer and on the command line (the session commands).
    Both,
    /// Only on the command line (the console's own views: they are no message to a session).
    Line,
}

/// One command: its name, its arguments as the help and the errors write them, and where
/// it can be typed.
#[derive(Debug, Clone, Copy)]
pub struct Command {
    pub name: &'static str,
    pub args: &'static str,
    pub typed: Typed,
}

const fn both(name: &'static str, args: &'static str) -> Command {
    Command {
        name,
        args,
        typed: Typed::Both,
    }
}

const fn line(name: &'static str) -> Command {
    line_with(name, "")
}

const fn line_with(name: &'static str, args: &'static str) -> Command {
    Command {
        name,
        args,
        typed: Typed::Line,
    }
}

/// Every command, in the order the help and the errors list them.
pub const COMMANDS: &[Command] = &[
    line("traffic"),
    line("exchanges"),
    line("sessions"),
    line("transcript"),
    line("messages"),
    line_with("source", "[name|all]"),
    both("send", "on|off|inherit"),
    both("spawn", "[--agent <id>] <task>"),
    both("ask", "<session> <message>"),
    both("forward", "<session> [lines]"),
    both("status", "[session]"),
    both("abort", "[session]"),
    both("agents", ""),
    both("new", "<session> [message]"),
    both("help", ""),
    line("quit"),
];

/// The commands that can be typed after `sigil`.
pub fn commands(sigil: Sigil) -> impl Iterator<Item = &'static Command> {
    COMMANDS
        .iter()
        .filter(move |c| sigil == Sigil::Colon || c.typed == Typed::Both)
}

/// Every command typed after `sigil` with its usage, for the "unknown command" message.
pub fn usage_list(sigil: Sigil) -> String {
    commands(sigil)
        .map(|c| usage(sigil, c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `/send on|off|inherit`, `:traffic`.
pub fn usage(sigil: Sigil, c: &Command) -> String {
    if c.args.is_empty() {
        format!("{}{}", sigil.char(), c.name)
    } else {
        format!("{}{} {}", sigil.char(), c.name, c.args)
    }
}

/// The names typed after `sigil`, each with it (`/send /spawn …`), for the help.
pub fn names(sigil: Sigil) -> String {
    commands(sigil)
        .map(|c| format!("{}{}", sigil.char(), c.name))
        .collect::<Vec<_>>()
        .join(" ")
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
/// there (then Tab leaves the composer). `before_cursor` starts with the sigil.
pub fn complete(
    sigil: Sigil,
    before_cursor: &str,
    keys: &[&str],
    agents: &[&str],
) -> Option<Completion> {
    let rest = before_cursor.strip_prefix(sigil.char())?;
    let word_start = before_cursor
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map(|(i, c)| i + c.len_utf8())
        .unwrap_or(0);
    let word = &before_cursor[word_start..];
    if word_start == 0 {
        let names: Vec<String> = commands(sigil)
            .map(|c| {
                // A command that takes arguments completes with the space before them.
                if c.args.is_empty() {
                    format!("{}{}", sigil.char(), c.name)
                } else {
                    format!("{}{} ", sigil.char(), c.name)
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
        ("ask" | "forward" | "new" | "status" | "abort", []) => {
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
        let c = complete(Sigil::Slash, "/st", KEYS, &[]).expect("a command");
        assert_eq!(c.replace.as_deref(), Some("/status "));
        let c = complete(Sigil::Slash, "/s", KEYS, &[]).expect("several");
        assert_eq!(c.candidates, vec!["/send", "/spawn", "/status"]);
        assert_eq!(c.replace, None);
        assert!(complete(Sigil::Slash, "hello", KEYS, &[]).is_none());
    }

    #[test]
    fn keys_complete_by_any_part() {
        let c = complete(Sigil::Slash, "/ask disc", KEYS, &[]).expect("one key");
        assert_eq!(c.replace.as_deref(), Some("agent:work:discord:group:dev "));
        assert_eq!(c.word_chars, 4);
        let c = complete(Sigil::Slash, "/ask tele", KEYS, &[]).expect("two keys");
        assert_eq!(c.replace.as_deref(), Some("agent:main:telegram:direct:"));
        assert_eq!(c.candidates.len(), 2);
        // The message after the key is not completed.
        assert!(complete(Sigil::Slash, "/ask agent:main:main tele", KEYS, &[]).is_none());
    }

    #[test]
    fn agents_complete_after_the_flag() {
        let c = complete(Sigil::Slash, "/spawn --agent w", KEYS, &["main", "work"]).expect("work");
        assert_eq!(c.replace.as_deref(), Some("work "));
        let c = complete(Sigil::Slash, "/spawn --ag", KEYS, &[]).expect("the flag");
        assert_eq!(c.replace.as_deref(), Some("--agent "));
    }

    #[test]
    fn the_command_line_completes_its_own_commands_and_the_session_ones() {
        let c = complete(Sigil::Colon, ":tr", KEYS, &[]).expect("two");
        assert_eq!(c.candidates, vec![":traffic", ":transcript"]);
        assert_eq!(c.replace.as_deref(), Some(":tra"));
        let c = complete(Sigil::Colon, ":traf", KEYS, &[]).expect("one");
        assert_eq!(c.replace.as_deref(), Some(":traffic"));
        let c = complete(Sigil::Colon, ":send of", KEYS, &[]).expect("off");
        assert_eq!(c.replace.as_deref(), Some("off"));
        let c = complete(Sigil::Colon, ":status disc", KEYS, &[]).expect("a key");
        assert_eq!(c.replace.as_deref(), Some("agent:work:discord:group:dev "));
        // The console's own views are no slash commands.
        assert!(complete(Sigil::Slash, "/traf", KEYS, &[]).is_none());
        assert!(!usage_list(Sigil::Slash).contains("traffic"));
        assert!(usage_list(Sigil::Colon).contains(":send on|off|inherit"));
    }

    #[test]
    fn common_prefix_respects_characters() {
        assert_eq!(common_prefix(&["äb".into(), "äc".into()]), "ä");
        assert_eq!(common_prefix(&["x".into(), "y".into()]), "");
    }
}
