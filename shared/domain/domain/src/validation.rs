//! Field-level validation problems, collected so that one response can name
//! every offending field at once (a client fixes a request in one round trip).

use crate::codes::Code;
use serde::Serialize;
use validator::{ValidationErrors, ValidationErrorsKind};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// Path of the field in the request body, e.g. `node_groups[0].count`.
    pub field: String,
    /// Stable machine-readable reason, e.g. `validation.range`.
    pub code: Code,
    pub message: String,
}

/// A request that failed validation, with every problem found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid input: {}", .0.iter().map(|p| p.field.as_str()).collect::<Vec<_>>().join(", "))]
pub struct Invalid(pub Vec<FieldError>);

impl Invalid {
    pub fn one(field: impl Into<String>, code: Code, message: impl Into<String>) -> Invalid {
        Invalid(vec![FieldError {
            field: field.into(),
            code,
            message: message.into(),
        }])
    }
}

#[derive(Debug, Default)]
pub struct Problems(Vec<FieldError>);

impl Problems {
    pub fn new() -> Problems {
        Problems::default()
    }

    pub fn push(&mut self, field: impl Into<String>, code: Code, message: impl Into<String>) {
        self.0.push(FieldError {
            field: field.into(),
            code,
            message: message.into(),
        });
    }

    /// Records `check`'s error, if any, against `field`.
    pub fn check(&mut self, field: impl Into<String>, code: Code, check: Result<(), String>) {
        if let Err(message) = check {
            self.push(field, code, message);
        }
    }

    /// Adds the problems the `validator` derive found, prefixed with `prefix`.
    pub fn extend_validator(&mut self, prefix: &str, errors: &ValidationErrors) {
        flatten(prefix, errors, &mut self.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn finish(mut self) -> Result<(), Invalid> {
        if self.0.is_empty() {
            Ok(())
        } else {
            // Deterministic order makes responses and tests stable.
            self.0
                .sort_by(|a, b| a.field.cmp(&b.field).then(a.code.cmp(&b.code)));
            self.0.dedup();
            Err(Invalid(self.0))
        }
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

fn flatten(prefix: &str, errors: &ValidationErrors, out: &mut Vec<FieldError>) {
    for (name, kind) in errors.errors() {
        let path = join(prefix, name);
        match kind {
            ValidationErrorsKind::Field(list) => {
                for e in list {
                    let message = e
                        .message
                        .as_ref()
                        .map(|m| m.to_string())
                        .unwrap_or_else(|| describe(e));
                    out.push(FieldError {
                        field: path.clone(),
                        code: validator_code(&e.code),
                        message,
                    });
                }
            }
            ValidationErrorsKind::Struct(inner) => flatten(&path, inner, out),
            ValidationErrorsKind::List(items) => {
                for (index, inner) in items {
                    flatten(&format!("{path}[{index}]"), inner, out);
                }
            }
        }
    }
}

/// The code of one of the derive's rules: `range` is `validation.range`.
/// Every rule the domain uses has its code in the list (a test says so);
/// one added without a code is at least a 400 on its field.
fn validator_code(rule: &str) -> Code {
    Code::find(&format!("validation.{rule}")).unwrap_or(Code::VALIDATION_INVALID)
}

/// A readable sentence for the derive's built-in rules, which carry only
/// their parameters.
fn describe(e: &validator::ValidationError) -> String {
    let param = |k: &str| e.params.get(k).map(|v| v.to_string());
    match e.code.as_ref() {
        "range" => match (param("min"), param("max")) {
            (Some(min), Some(max)) => format!("must be between {min} and {max}"),
            (Some(min), None) => format!("must be at least {min}"),
            (None, Some(max)) => format!("must be at most {max}"),
            _ => "is out of range".to_string(),
        },
        "length" => match (param("min"), param("max")) {
            (Some(min), Some(max)) => format!("length must be between {min} and {max}"),
            (Some(min), None) => format!("length must be at least {min}"),
            (None, Some(max)) => format!("length must be at most {max}"),
            _ => "has the wrong length".to_string(),
        },
        other => format!("is invalid ({other})"),
    }
}

/// For an optional text field that, when sent, must be text: `null` is
/// refused as a wrong type (400 naming the field) instead of read as left
/// out. The fields that come together or exclude each other (a schedule's
/// `interval` and `cron`, a restore's rename) use it, so that the document
/// can state their rule (`oneOf`, `dependentRequired`) exactly: a `null`
/// beside a value would otherwise be a second spelling of "absent".
pub fn text_not_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    <String as serde::Deserialize>::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derive's rules the domain uses (`#[validate(range)]` and
    /// `#[validate(length)]`) answer with codes of their own.
    #[test]
    fn the_derives_rules_have_their_own_codes() {
        assert_eq!(validator_code("range"), Code::VALIDATION_RANGE);
        assert_eq!(validator_code("length"), Code::VALIDATION_LENGTH);
        assert_eq!(validator_code("email"), Code::VALIDATION_INVALID);
    }
}
