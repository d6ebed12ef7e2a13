//! `switchboard config init|check`: the documented default config, and its validation.

use anyhow::Result;

use switchboard_config::{self as config};
use switchboard_types::text_safety::{safe_line, safe_text};

use super::ExitError;
use super::args::{Cli, ConfigCommand};

pub(crate) fn config_cmd(cli: &Cli, cmd: &ConfigCommand) -> Result<()> {
    match cmd {
        ConfigCommand::Init { file, force } => {
            let path = match file {
                Some(p) => p.clone(),
                None => cli.config_path()?,
            };
            config::write_default(&path, *force)?;
            println!("wrote {}", path.display());
            Ok(())
        }
        ConfigCommand::Check { file } => {
            let path = match file {
                Some(p) => p.clone(),
                None => cli.config_path()?,
            };
            let problems = config::check_file(&path)?;
            if problems.is_empty() {
                // A value used other than as written is a warning, not an error: the config
                // works (exit 0), but the owner learns what is used instead.
                let warnings = config::check_file_warnings(&path)?;
                for w in &warnings {
                    let line = w.line.map(|l| format!(":{l}")).unwrap_or_default();
                    eprintln!(
                        "{}{line}: {}: warning: {}",
                        path.display(),
                        safe_line(&w.path),
                        safe_text(&w.message)
                    );
                }
                match warnings.len() {
                    0 => println!("{}: ok", path.display()),
                    n => println!(
                        "{}: ok, {}",
                        path.display(),
                        switchboard_types::words::count(n, "warning")
                    ),
                }
                return Ok(());
            }
            for p in &problems {
                let mut at = path.display().to_string();
                if let Some(line) = p.line {
                    at.push_str(&format!(":{line}"));
                }
                let message = safe_text(&p.message);
                if p.path.is_empty() {
                    eprintln!("{at}: {message}");
                } else {
                    eprintln!("{at}: {}: {message}", safe_line(&p.path));
                }
            }
            Err(ExitError {
                code: 1,
                message: format!(
                    "{} in {}",
                    switchboard_types::words::count(problems.len(), "problem"),
                    path.display()
                ),
            }
            .into())
        }
    }
}
