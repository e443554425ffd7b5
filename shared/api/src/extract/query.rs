//! Query parameters, deserialised into the operation's own struct.
//!
//! Each operation declares its parameters once, as a struct deriving
//! `Deserialize` (with `deny_unknown_fields`) and utoipa's `IntoParams`: the
//! same fields make the OpenAPI parameters and decide what a request may
//! send. The deserializer here reads the query as text pairs and reports
//! failures as [`ParamError`], a type: an unknown name, or a value its
//! field refused under the field's error code (see [`refusing`]).

use crate::error::ApiError;
use axum::extract::{FromRequestParts, Query};
use axum::http::Uri;
use axum::http::request::Parts;
use floe_domain::Code;
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, Visitor};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;

/// An operation's query parameters as `T`, or why they are refused.
///
/// Extracting never fails: the handler calls [`Params::check`] after its
/// role check, so a caller without the role is told that first, whatever
/// its query.
pub struct Params<T>(Result<T, ApiError>);

impl<T> Params<T> {
    pub fn check(self) -> Result<T, ApiError> {
        self.0
    }
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(Params(parse_query(&parts.uri)))
    }
}

/// Parses the URI's query into `T`. A name sent twice counts once, with its
/// last value.
pub fn parse_query<T: DeserializeOwned>(uri: &Uri) -> Result<T, ApiError> {
    // Text pairs never fail to decode (bad escapes decode lossily); the
    // error is there for the type's sake.
    let Query(pairs) = Query::<BTreeMap<String, String>>::try_from_uri(uri).map_err(|_| {
        ApiError::new(
            Code::REQUEST_MALFORMED_QUERY,
            "the query string could not be read",
        )
    })?;
    T::deserialize(Pairs(&pairs)).map_err(ApiError::from)
}

/// Why a query was refused.
#[derive(Debug)]
pub enum ParamError {
    /// A name the operation does not take; `known` are the names it does.
    Unknown {
        name: String,
        known: &'static [&'static str],
    },
    /// A value its field refused, under the field's error code.
    Refused {
        code: Code,
        name: String,
        message: String,
    },
    /// Any other failure serde reports (none of the API's own parameter
    /// types makes one).
    Other(String),
}

impl ParamError {
    /// Files an error met while reading `name`'s value under that name.
    fn at(self, name: &str) -> ParamError {
        match self {
            ParamError::Refused { code, message, .. } => ParamError::Refused {
                code,
                name: name.to_string(),
                message,
            },
            ParamError::Other(message) => ParamError::Refused {
                code: Code::VALIDATION_TYPE,
                name: name.to_string(),
                message,
            },
            unknown => unknown,
        }
    }
}

impl From<ParamError> for ApiError {
    fn from(e: ParamError) -> ApiError {
        match e {
            ParamError::Unknown { name, known: [] } => ApiError::field(
                Code::VALIDATION_UNKNOWN_PARAMETER,
                name,
                "is not a parameter of this operation, which takes none",
            ),
            ParamError::Unknown { name, known } => ApiError::field(
                Code::VALIDATION_UNKNOWN_PARAMETER,
                name,
                format!(
                    "is not a parameter of this operation (known: {})",
                    known.join(", ")
                ),
            ),
            ParamError::Refused {
                code,
                name,
                message,
            } => ApiError::field(code, name, message),
            ParamError::Other(message) => ApiError::new(Code::VALIDATION_TYPE, message),
        }
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamError::Unknown { name, .. } => write!(f, "unknown parameter {name}"),
            ParamError::Refused { name, message, .. } => write!(f, "{name}: {message}"),
            ParamError::Other(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ParamError {}

impl de::Error for ParamError {
    fn custom<T: fmt::Display>(msg: T) -> ParamError {
        ParamError::Other(msg.to_string())
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> ParamError {
        ParamError::Unknown {
            name: field.to_string(),
            known: expected,
        }
    }
}

/// Deserialises a parameter's text with `parse`; a value it refuses is
/// refused with `code`, naming the parameter.
///
/// Serde's data model has no place for an error code, so the value asks
/// for a newtype struct named with it: the query deserializer files any
/// error inside under that code. Read by another deserializer, the name is
/// ignored and the error is that deserializer's own.
pub fn refusing<'de, D, T>(
    deserializer: D,
    code: Code,
    parse: fn(&str) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    struct Text<T>(fn(&str) -> Result<T, String>);

    impl<'de, T> Visitor<'de> for Text<T> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("text")
        }

        fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
            d.deserialize_str(self)
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
            (self.0)(text).map_err(E::custom)
        }
    }

    deserializer.deserialize_newtype_struct(code.name(), Text(parse))
}

/// The query's pairs as a map: `deserialize_struct` checks every name
/// against the struct's fields before it reads a value, so a misspelt name
/// is what a request hears about first.
struct Pairs<'a>(&'a BTreeMap<String, String>);

impl<'de> Deserializer<'de> for Pairs<'de> {
    type Error = ParamError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ParamError> {
        visitor.visit_map(Entries {
            iter: self.0.iter(),
            name: "",
            value: None,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ParamError> {
        if let Some(name) = self.0.keys().find(|k| !fields.contains(&k.as_str())) {
            return Err(de::Error::unknown_field(name, fields));
        }
        self.deserialize_any(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

struct Entries<'de> {
    iter: std::collections::btree_map::Iter<'de, String, String>,
    name: &'de str,
    value: Option<&'de str>,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = ParamError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ParamError> {
        let Some((name, value)) = self.iter.next() else {
            return Ok(None);
        };
        self.name = name;
        self.value = Some(value);
        seed.deserialize(BorrowedStrDeserializer::new(name))
            .map(Some)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<T::Value, ParamError> {
        let text = self.value.take().unwrap_or_default();
        seed.deserialize(Value(text)).map_err(|e| e.at(self.name))
    }
}

/// One parameter's text.
struct Value<'de>(&'de str);

impl<'de> Deserializer<'de> for Value<'de> {
    type Error = ParamError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ParamError> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ParamError> {
        visitor.visit_some(self)
    }

    /// See [`refusing`]: the name is the error code of what is inside.
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ParamError> {
        // The name is a code's, given by `refusing`.
        let code = Code::find(name).unwrap_or(Code::VALIDATION_TYPE);
        visitor.visit_newtype_struct(self).map_err(|e| match e {
            ParamError::Other(message) | ParamError::Refused { message, .. } => {
                ParamError::Refused {
                    code,
                    name: String::new(),
                    message,
                }
            }
            unknown => unknown,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}
