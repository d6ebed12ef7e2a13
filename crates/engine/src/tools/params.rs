//! Reading tool parameters from the JSON an agent sent: camelCase names with their
//! snake_case aliases, required strings, numbers clamped as OpenClaw does, clear input errors.

use serde_json::{Map, Value};

use super::context::ToolInputError;

/// A tool's parameter object.
pub struct Params<'a> {
    map: &'a Map<String, Value>,
}

/// `sessionKey` → `session_key`.
fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

impl<'a> Params<'a> {
    pub fn new(value: &'a Value) -> Result<Params<'a>, ToolInputError> {
        match value {
            Value::Object(map) => Ok(Params { map }),
            other => Err(ToolInputError::Invalid(format!(
                "parameters must be a JSON object, got {}",
                type_name(other)
            ))),
        }
    }

    /// The value under `name` or its snake_case alias; JSON `null` counts as absent.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.map
            .get(name)
            .or_else(|| self.map.get(&snake(name)))
            .filter(|v| !v.is_null())
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// A string; a present non-string is an input error.
    pub fn string(&self, name: &str) -> Result<Option<&'a str>, ToolInputError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => Err(ToolInputError::Invalid(format!(
                "{name} must be a string, got {}",
                type_name(other)
            ))),
        }
    }

    /// A required, non-blank string: OpenClaw's `<name> required`.
    pub fn required_string(&self, name: &str) -> Result<&'a str, ToolInputError> {
        match self.string(name)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            _ => Err(ToolInputError::Missing(name.to_string())),
        }
    }

    /// A number (finite). A present non-number is an input error.
    pub fn number(&self, name: &str) -> Result<Option<f64>, ToolInputError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(f) if f.is_finite() => Ok(Some(f)),
                _ => Err(ToolInputError::Invalid(format!(
                    "{name} must be a finite number"
                ))),
            },
            Some(other) => Err(ToolInputError::Invalid(format!(
                "{name} must be a number, got {}",
                type_name(other)
            ))),
        }
    }

    /// `floor(x)` clamped to `lo..=hi`, or `default` when absent.
    pub fn clamped(
        &self,
        name: &str,
        default: i64,
        lo: i64,
        hi: i64,
    ) -> Result<i64, ToolInputError> {
        Ok(match self.number(name)? {
            None => default,
            Some(f) => (f.floor().clamp(lo as f64, hi as f64)) as i64,
        })
    }

    /// A whole number in `0..=max` (a fraction is floored), or `None` when absent. Anything
    /// outside is an input error naming the field, its range and what was given, so no work
    /// starts on a value the engine would have to guess about (1e20 seconds, -1 seconds).
    /// `hint` follows the range in the message (what 0 means, what to do instead).
    pub fn whole_in(
        &self,
        name: &str,
        max: u64,
        hint: &str,
    ) -> Result<Option<u64>, ToolInputError> {
        let Some(raw) = self.get(name) else {
            return Ok(None);
        };
        let out_of_range = || {
            ToolInputError::Invalid(format!(
                "{name} must be a number from 0 to {max}{hint} (got {raw})"
            ))
        };
        let value = self.number(name).map_err(|_| out_of_range())?;
        match value {
            Some(f) if f >= 0.0 && f.floor() <= max as f64 => Ok(Some(f.floor() as u64)),
            Some(_) => Err(out_of_range()),
            None => Ok(None),
        }
    }

    pub fn boolean(&self, name: &str) -> Result<Option<bool>, ToolInputError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(ToolInputError::Invalid(format!(
                "{name} must be true or false, got {}",
                type_name(other)
            ))),
        }
    }

    /// An array of strings.
    pub fn strings(&self, name: &str) -> Result<Option<Vec<&'a str>>, ToolInputError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str().ok_or_else(|| {
                        ToolInputError::Invalid(format!("{name} must be an array of strings"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(ToolInputError::Invalid(format!(
                "{name} must be an array of strings, got {}",
                type_name(other)
            ))),
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn aliases_and_clamps() {
        let v = json!({"session_key": "main", "limit": 0.5, "activeMinutes": -3});
        let p = Params::new(&v).unwrap();
        assert_eq!(p.required_string("sessionKey").unwrap(), "main");
        assert_eq!(p.clamped("limit", 50, 1, 200).unwrap(), 1);
        assert_eq!(p.clamped("activeMinutes", 0, 1, i64::MAX).unwrap(), 1);
        assert_eq!(p.clamped("missing", 50, 1, 200).unwrap(), 50);
        assert!(matches!(
            p.required_string("message"),
            Err(ToolInputError::Missing(_))
        ));
        let bad = json!({"limit": "ten"});
        assert!(Params::new(&bad).unwrap().number("limit").is_err());
        assert!(Params::new(&json!([1])).is_err());
    }

    #[test]
    fn whole_numbers_outside_their_range_name_field_range_and_value() {
        let v = json!({"a": 2.9, "b": 1e20, "c": -0.5, "d": "5", "e": 10, "f": u64::MAX});
        let p = Params::new(&v).unwrap();
        assert_eq!(p.whole_in("a", 10, "").unwrap(), Some(2));
        assert_eq!(p.whole_in("e", 10, "").unwrap(), Some(10));
        assert_eq!(p.whole_in("missing", 10, "").unwrap(), None);
        let message = |name| match p.whole_in(name, 10, "; 0 waits not at all") {
            Err(ToolInputError::Invalid(m)) => m,
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(
            message("b"),
            "b must be a number from 0 to 10; 0 waits not at all (got 1e+20)"
        );
        assert!(message("c").ends_with("(got -0.5)"));
        assert!(message("d").ends_with("(got \"5\")"));
        assert!(message("f").ends_with("(got 18446744073709551615)"));
    }
}
