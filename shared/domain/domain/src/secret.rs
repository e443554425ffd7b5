//! Credentials travel inward only. `SecretString` is how a secret arrives in a
//! request; `Sealed` is how it is kept (ciphertext). Neither can be printed,
//! and `SecretString` cannot be serialised at all, so no response, log line or
//! error can carry a secret by accident.

use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// A secret as sent by a client. Deserialise-only; `Debug` redacts.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(value: impl Into<String>) -> SecretString {
        SecretString(value.into())
    }

    /// The only way to the plaintext: named so that every use is easy to find.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretString(<redacted>)")
    }
}

impl<'de> Deserialize<'de> for SecretString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(SecretString)
    }
}

/// A secret encrypted at rest (the output of the secrets crate's cipher).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Sealed(String);

impl Sealed {
    pub fn new(ciphertext: impl Into<String>) -> Sealed {
        Sealed(ciphertext.into())
    }

    pub fn ciphertext(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Sealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sealed(<redacted>)")
    }
}

/// Shows enough of an access key id to recognise it: `****WXYZ`.
pub fn mask_access_key(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.len() <= 8 {
        return "****".to_string();
    }
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("****{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts() {
        let s: SecretString = serde_json::from_str("\"hunter2-very-secret\"")
            .unwrap_or_else(|_| SecretString::new(""));
        assert_eq!(s.expose(), "hunter2-very-secret");
        assert!(!format!("{s:?}").contains("hunter2"));
        let sealed = Sealed::new("local:v1:abcdef");
        assert!(!format!("{sealed:?}").contains("abcdef"));
    }

    #[test]
    fn masks() {
        assert_eq!(mask_access_key("AKIAIOSFODNN7EXAMPLE"), "****MPLE");
        assert_eq!(mask_access_key("XXXXX"), "****");
    }
}
