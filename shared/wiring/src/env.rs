//! Reading variables: from the process environment, or from a map in tests.

use std::collections::HashMap;

/// A configuration mistake, naming the variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}: {message}")]
pub struct ConfigError {
    pub name: &'static str,
    pub message: String,
}

pub(crate) fn invalid(name: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        name,
        message: message.into(),
    }
}

/// Where variables come from. Values are trimmed, and an empty value counts
/// as unset (a template that writes `""` for "no value" means that).
pub struct Env {
    lookup: Box<Lookup>,
}

type Lookup = dyn Fn(&str) -> Option<String> + Send + Sync;

impl Env {
    /// The process environment.
    pub fn process() -> Env {
        Env {
            lookup: Box::new(|name| std::env::var(name).ok()),
        }
    }

    /// A fixed set of variables (tests).
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Env {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Env {
            lookup: Box::new(move |name| map.get(name).cloned()),
        }
    }

    pub fn get(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    pub(crate) fn required(&self, name: &'static str, what: &str) -> Result<String, ConfigError> {
        self.get(name)
            .ok_or_else(|| invalid(name, format!("is required: {what}")))
    }

    pub(crate) fn flag(&self, name: &'static str) -> Result<bool, ConfigError> {
        match self.get(name).as_deref() {
            None | Some("0") | Some("false") => Ok(false),
            Some("1") | Some("true") => Ok(true),
            Some(_) => Err(invalid(name, "must be true or false")),
        }
    }

    pub(crate) fn whole<T: std::str::FromStr>(
        &self,
        name: &'static str,
        default: T,
        what: &str,
    ) -> Result<T, ConfigError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| invalid(name, format!("must be {what}"))),
        }
    }
}
