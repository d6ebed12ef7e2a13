//! The `:` command line (k9s, vim): typed over the hint bar from any pane or view, it takes
//! every key until Enter runs it or Esc closes it, so letters typed after `:` never fire the
//! panes' single-key actions. Its commands are the composer's table (`complete::COMMANDS`):
//! the console's views (`:traffic`, `:exchanges`, `:messages` …) and the session commands
//! (`:send off`, `:status` …).

use crate::complete::{self, Sigil};

/// The longest line kept (a paste of a whole file is cut here).
pub const LINE_MAX: usize = 1_000;

/// The line being typed (without its `:`) and the candidates Tab found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandLine {
    pub text: String,
    pub candidates: Vec<String>,
}

impl CommandLine {
    /// Add typed or pasted text, up to `LINE_MAX` bytes (cut at a character's boundary).
    pub fn push_str(&mut self, text: &str) {
        for c in text.chars() {
            if self.text.len() + c.len_utf8() > LINE_MAX {
                break;
            }
            self.text.push(c);
        }
        self.candidates.clear();
    }
}

/// What a line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineCommand {
    /// The traffic view.
    Traffic,
    /// The rounds pane over every session's exchanges.
    Exchanges,
    /// A pane, the overlays closed.
    Sessions,
    Transcript,
    /// The notices log.
    Messages,
    /// Only one source's sessions (`None`: every source's).
    Source(Option<String>),
    Help,
    Quit,
    /// A session command the composer knows too (`send`, `status` …) with its arguments.
    Session {
        name: &'static str,
        arg: String,
    },
}

/// Why a line does not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    Empty,
    Unknown(String),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::Empty => write!(f, "no command: type one after `:` (Tab lists them)"),
            LineError::Unknown(name) => write!(
                f,
                "unknown command :{name} (Tab after `:` lists them: {})",
                complete::names(Sigil::Colon)
            ),
        }
    }
}

/// The command a line names: a command's whole name, or `q` (vim's) for `quit`.
pub fn parse(text: &str) -> Result<LineCommand, LineError> {
    let text = text.trim();
    let (name, arg) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let name = name.strip_prefix(':').unwrap_or(name);
    if name.is_empty() {
        return Err(LineError::Empty);
    }
    let name = if name == "q" { "quit" } else { name };
    let command = complete::commands(Sigil::Colon)
        .find(|c| c.name == name)
        .ok_or_else(|| LineError::Unknown(name.to_string()))?;
    Ok(match command.name {
        "traffic" => LineCommand::Traffic,
        "exchanges" => LineCommand::Exchanges,
        "sessions" => LineCommand::Sessions,
        "transcript" => LineCommand::Transcript,
        "messages" => LineCommand::Messages,
        "source" => match arg.trim() {
            "" | "all" => LineCommand::Source(None),
            name => LineCommand::Source(Some(name.to_string())),
        },
        "help" => LineCommand::Help,
        "quit" => LineCommand::Quit,
        name => LineCommand::Session {
            name,
            arg: arg.trim().to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_arguments_and_unknown_commands() {
        assert_eq!(parse("traffic"), Ok(LineCommand::Traffic));
        assert_eq!(parse(" q "), Ok(LineCommand::Quit));
        assert_eq!(
            parse("send  off "),
            Ok(LineCommand::Session {
                name: "send",
                arg: "off".into()
            })
        );
        assert_eq!(parse(""), Err(LineError::Empty));
        assert_eq!(parse("traf"), Err(LineError::Unknown("traf".into())));
        let said = LineError::Unknown("bogus".into()).to_string();
        assert!(said.starts_with("unknown command :bogus"), "{said}");
    }

    #[test]
    fn a_pasted_flood_is_cut() {
        let mut l = CommandLine::default();
        l.push_str(&"é".repeat(LINE_MAX));
        assert!(l.text.len() <= LINE_MAX);
        assert!(l.text.chars().all(|c| c == 'é'));
    }
}
