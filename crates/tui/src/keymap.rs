//! Keys → intents: the defaults from `assets/keymap.json5`, overridden by a user file. The
//! same table drives the help overlay and the hint bar.

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::action::Intent;

const DEFAULT_KEYMAP: &str = include_str!("../../../assets/keymap.json5");

/// A key as written in the keymap file, normalised so lookups match what the terminal sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Chord {
    code: KeyCodeKey,
    ctrl: bool,
    alt: bool,
}

/// The parts of `KeyCode` a keymap can name, in an orderable form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum KeyCodeKey {
    Char(char),
    Named(&'static str),
    F(u8),
}

const NAMED: &[(&str, KeyCode)] = &[
    ("tab", KeyCode::Tab),
    ("backtab", KeyCode::BackTab),
    ("enter", KeyCode::Enter),
    ("esc", KeyCode::Esc),
    ("up", KeyCode::Up),
    ("down", KeyCode::Down),
    ("left", KeyCode::Left),
    ("right", KeyCode::Right),
    ("pageup", KeyCode::PageUp),
    ("pagedown", KeyCode::PageDown),
    ("home", KeyCode::Home),
    ("end", KeyCode::End),
    ("backspace", KeyCode::Backspace),
    ("delete", KeyCode::Delete),
    ("space", KeyCode::Char(' ')),
];

fn code_key(code: KeyCode) -> Option<KeyCodeKey> {
    match code {
        KeyCode::Char(c) => Some(KeyCodeKey::Char(c)),
        KeyCode::F(n) => Some(KeyCodeKey::F(n)),
        other => NAMED
            .iter()
            .find(|(_, c)| *c == other)
            .map(|(n, _)| KeyCodeKey::Named(n)),
    }
}

fn chord_of(key: &KeyEvent) -> Option<Chord> {
    Some(Chord {
        code: code_key(key.code)?,
        ctrl: key.modifiers.contains(KeyModifiers::CONTROL),
        alt: key.modifiers.contains(KeyModifiers::ALT),
    })
}

/// The function keys a binding may name. Terminals send F1-F12, and F13-F24 on keyboards
/// and terminals that have them (xterm's terminfo defines kf1..kf24; several terminals send
/// shift+F1..F12 as F13..F24). Beyond F24 crossterm reports keys only under the kitty keyboard
/// protocol, which the console does not enable, so such a binding could never fire: it is
/// a mistake in the file, and saying so beats ignoring it.
const FUNCTION_KEYS: std::ops::RangeInclusive<u8> = 1..=24;

fn parse_chord(spec: &str) -> Result<Chord, String> {
    let mut ctrl = false;
    let mut alt = false;
    let mut rest = spec;
    loop {
        if let Some(r) = rest.strip_prefix("ctrl+") {
            ctrl = true;
            rest = r;
        } else if let Some(r) = rest.strip_prefix("alt+") {
            alt = true;
            rest = r;
        } else if let Some(r) = rest.strip_prefix("shift+") {
            // Shifted characters arrive as the character itself (`G`, `?`).
            rest = r;
        } else {
            break;
        }
    }
    let code = if rest.chars().count() == 1 {
        let c = rest.chars().next().ok_or("empty key")?;
        KeyCodeKey::Char(c)
    } else if let Some(digits) = rest.strip_prefix('f')
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
    {
        match digits.parse::<u8>() {
            Ok(n) if FUNCTION_KEYS.contains(&n) && n.to_string() == digits => KeyCodeKey::F(n),
            _ => {
                return Err(format!(
                    "unknown key {spec:?}: function keys are f1 to f24 (F1 to F24)"
                ));
            }
        }
    } else if let Some((name, _)) = NAMED.iter().find(|(n, _)| *n == rest) {
        KeyCodeKey::Named(name)
    } else {
        return Err(format!("unknown key {spec:?}"));
    };
    Ok(Chord { code, ctrl, alt })
}

fn chord_label(c: &Chord) -> String {
    let mut s = String::new();
    if c.ctrl {
        s.push_str("ctrl+");
    }
    if c.alt {
        s.push_str("alt+");
    }
    match c.code {
        KeyCodeKey::Char(ch) => s.push(ch),
        KeyCodeKey::Named(n) => s.push_str(n),
        KeyCodeKey::F(n) => s.push_str(&format!("f{n}")),
    }
    s
}

/// The loaded keymap.
#[derive(Debug, Clone)]
pub struct Keymap {
    keys: BTreeMap<Chord, Intent>,
}

impl Keymap {
    /// The built-in defaults.
    pub fn defaults() -> Keymap {
        let mut k = Keymap {
            keys: BTreeMap::new(),
        };
        // The shipped file is checked by a test; a broken one leaves the defaults empty
        // rather than taking the console down.
        let _ = k.apply(DEFAULT_KEYMAP);
        k
    }

    /// The defaults with a user file's entries on top (`"key": null` unbinds).
    pub fn with_overrides(text: &str) -> Result<Keymap, String> {
        let mut k = Keymap::defaults();
        k.apply(text)?;
        Ok(k)
    }

    fn apply(&mut self, text: &str) -> Result<(), String> {
        // The same guard as the config's: json5 recurses once per level of nesting.
        switchboard_types::config::text_limits::check(text).map_err(|e| format!("keymap: {e}"))?;
        let map: BTreeMap<String, Option<String>> =
            json5::from_str(text).map_err(|e| format!("keymap: {e}"))?;
        for (key, intent) in map {
            let chord = parse_chord(&key)?;
            match intent {
                None => {
                    self.keys.remove(&chord);
                }
                Some(name) => {
                    let intent = Intent::parse(&name)
                        .ok_or_else(|| format!("keymap: unknown action {name:?} for {key:?}"))?;
                    self.keys.insert(chord, intent);
                }
            }
        }
        Ok(())
    }

    pub fn intent(&self, key: &KeyEvent) -> Option<Intent> {
        self.keys.get(&chord_of(key)?).copied()
    }

    /// The first key bound to `intent` (`j` for down), or `-` when none is.
    pub fn key_for(&self, intent: Intent) -> String {
        self.keys
            .iter()
            .find(|(_, i)| **i == intent)
            .map(|(c, _)| chord_label(c))
            .unwrap_or_else(|| "-".into())
    }

    /// A view's key line (`esc close · j/k move`): each entry's intents by their first key,
    /// so a remapped key shows as remapped.
    pub fn hint_line(&self, entries: &[(&[Intent], &str)]) -> String {
        let parts: Vec<String> = entries
            .iter()
            .map(|(intents, what)| {
                let keys: Vec<String> = intents.iter().map(|i| self.key_for(*i)).collect();
                format!("{} {what}", keys.join("/"))
            })
            .collect();
        parts.join(" · ")
    }

    /// Keys bound to `intent`, as the help shows them (`j/down`).
    pub fn keys_for(&self, intent: Intent) -> String {
        self.keys_list(intent).join("/")
    }

    /// Keys bound to `intent`, each as the keymap file names it.
    pub fn keys_list(&self, intent: Intent) -> Vec<String> {
        self.keys
            .iter()
            .filter(|(_, i)| **i == intent)
            .map(|(c, _)| chord_label(c))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_keymap_parses_and_binds_the_basics() {
        let mut k = Keymap {
            keys: BTreeMap::new(),
        };
        k.apply(DEFAULT_KEYMAP).expect("default keymap");
        let key = |c| KeyEvent::new(c, KeyModifiers::NONE);
        assert_eq!(k.intent(&key(KeyCode::Char('q'))), Some(Intent::Quit));
        assert_eq!(k.intent(&key(KeyCode::Tab)), Some(Intent::FocusNext));
        assert_eq!(
            k.intent(&KeyEvent::new(KeyCode::Char('G'), KeyModifiers::SHIFT)),
            Some(Intent::Bottom)
        );
        assert_eq!(
            k.intent(&KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Intent::Quit)
        );
        assert_eq!(k.keys_for(Intent::Down), "j/down");
    }

    #[test]
    fn the_panes_have_numbers_z_zooms_and_colon_opens_the_command_line() {
        let k = Keymap::defaults();
        let key = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        assert_eq!(k.intent(&key('1')), Some(Intent::FocusSessions));
        assert_eq!(k.intent(&key('2')), Some(Intent::FocusTranscript));
        assert_eq!(k.intent(&key('3')), Some(Intent::FocusRounds));
        assert_eq!(k.intent(&key('z')), Some(Intent::Zoom));
        assert_eq!(k.intent(&key(':')), Some(Intent::Command));
        // In the exchange view the first two are its numbered sessions.
        assert_eq!(
            Intent::FocusSessions.in_exchange_view(),
            Some(Intent::JumpRequester)
        );
        assert_eq!(
            Intent::FocusTranscript.in_exchange_view(),
            Some(Intent::JumpTarget)
        );
        assert_eq!(Intent::FocusRounds.in_exchange_view(), None);
        // A user file written for the old defaults still loads and binds the jumps.
        let old = Keymap::with_overrides(r#"{ "r": "jump-requester", "o": "jump-target" }"#)
            .expect("old action names");
        assert_eq!(old.intent(&key('r')), Some(Intent::JumpRequester));
        assert_eq!(
            Intent::JumpTarget.in_exchange_view(),
            Some(Intent::JumpTarget)
        );
    }

    #[test]
    fn a_user_file_rebinds_and_unbinds() {
        let k = Keymap::with_overrides(r#"{ "x": "quit", "q": null }"#).expect("overrides");
        let key = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        assert_eq!(k.intent(&key('x')), Some(Intent::Quit));
        assert_eq!(k.intent(&key('q')), None);
        assert!(Keymap::with_overrides(r#"{ "x": "explode" }"#).is_err());
        assert!(Keymap::with_overrides(r#"{ "hyper+x": "quit" }"#).is_err());
    }

    #[test]
    fn function_keys_exist_from_f1_to_f24_only() {
        for spec in ["f1", "f12", "ctrl+f24"] {
            assert!(
                Keymap::with_overrides(&format!(r#"{{ "{spec}": "quit" }}"#)).is_ok(),
                "{spec}"
            );
        }
        for spec in ["f99", "f0", "f25", "f255", "f256", "f-1", "f01x"] {
            let err =
                Keymap::with_overrides(&format!(r#"{{ "{spec}": "quit" }}"#)).expect_err(spec);
            assert!(
                err.contains(&format!("unknown key \"{spec}\"")),
                "{spec}: {err}"
            );
        }
        let err = Keymap::with_overrides(r#"{ "f99": "quit" }"#).expect_err("f99");
        assert!(err.contains("F1 to F24"), "{err}");
    }

    #[test]
    fn a_deeply_nested_user_file_is_refused_with_its_line() {
        let deep = format!("{{\n \"x\": {}", "[".repeat(10_000));
        let err = Keymap::with_overrides(&deep).expect_err("too deep");
        assert!(
            err.starts_with("keymap: line 2: nested more than 128 levels deep"),
            "{err}"
        );
        // Brackets inside strings and comments are not nesting.
        let fine = format!("// {}\n{{ \"x\": \"quit\" }}", "[".repeat(10_000));
        assert!(Keymap::with_overrides(&fine).is_ok());
    }
}
