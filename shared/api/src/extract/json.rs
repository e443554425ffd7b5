//! JSON bodies, deserialised once from the parsed document, with errors
//! that say what went wrong in types rather than in serde_json's wording.
//!
//! The deserializer here reads a [`serde_json::Value`] as serde_json's own
//! does, with two differences: its error is [`BodyError`], which keeps the
//! kind of each failure (an unknown field, a missing one, an unknown
//! variant) as serde reports it, and it lets an integer field take a whole
//! float (see [`JsonValue::whole`]).

use crate::error::ApiError;
use floe_domain::Code;
use serde::de::value::{BorrowedStrDeserializer, MapDeserializer, SeqDeserializer};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, Expected, IntoDeserializer,
    Unexpected, VariantAccess, Visitor,
};
use serde_json::{Map, Value};
use std::fmt;

/// Parses a JSON object body, then deserialises it with the path of the
/// first offending field. Only objects are accepted at the top: serde would
/// otherwise take an array as a struct's fields in order.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::new(
            Code::REQUEST_BODY_REQUIRED,
            "a JSON body is required",
        ));
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            Code::REQUEST_MALFORMED_JSON,
            format!("malformed JSON at line {} column {}", e.line(), e.column()),
        )
    })?;
    if !value.is_object() {
        return Err(ApiError::field(
            Code::VALIDATION_TYPE,
            "body",
            "must be a JSON object",
        ));
    }
    parse_value_at(&value, "")
}

/// Deserialises `value`, naming fields relative to `prefix` (a request body
/// parsed in parts keeps exact field paths whatever its key order).
pub fn parse_value_at<T: DeserializeOwned>(value: &Value, prefix: &str) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(JsonValue(value)).map_err(|e| refusal(&e, prefix))
}

/// Why a body did not deserialise, as serde said it through [`de::Error`].
#[derive(Debug)]
pub struct BodyError {
    problem: Problem,
    /// Serde's sentence for it, which the answer quotes.
    message: String,
}

#[derive(Debug)]
enum Problem {
    UnknownField(String),
    MissingField(&'static str),
    UnknownVariant,
    /// A wrong type or value, or a type's own refusal.
    Invalid,
}

impl BodyError {
    fn invalid(message: String) -> BodyError {
        BodyError {
            problem: Problem::Invalid,
            message,
        }
    }
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BodyError {}

/// The sentences are serde's own (taken from `serde::de::value::Error`,
/// which words every kind the default way); only the kind is kept apart.
impl de::Error for BodyError {
    fn custom<T: fmt::Display>(msg: T) -> BodyError {
        BodyError::invalid(msg.to_string())
    }

    fn invalid_type(unexp: Unexpected<'_>, exp: &dyn Expected) -> BodyError {
        BodyError::invalid(format!("invalid type: {}, expected {exp}", Json(unexp)))
    }

    fn invalid_value(unexp: Unexpected<'_>, exp: &dyn Expected) -> BodyError {
        BodyError::invalid(format!("invalid value: {}, expected {exp}", Json(unexp)))
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> BodyError {
        BodyError {
            problem: Problem::UnknownField(field.to_string()),
            message: de::value::Error::unknown_field(field, expected).to_string(),
        }
    }

    fn missing_field(field: &'static str) -> BodyError {
        BodyError {
            problem: Problem::MissingField(field),
            message: de::value::Error::missing_field(field).to_string(),
        }
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> BodyError {
        BodyError {
            problem: Problem::UnknownVariant,
            message: de::value::Error::unknown_variant(variant, expected).to_string(),
        }
    }
}

/// A JSON value as JSON calls it: `null`, not serde's "unit value".
struct Json<'a>(Unexpected<'a>);

impl fmt::Display for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Unexpected::Unit => f.write_str("null"),
            other => other.fmt(f),
        }
    }
}

/// The API's error for a body that did not deserialise, naming the field.
fn refusal(e: &serde_path_to_error::Error<BodyError>, prefix: &str) -> ApiError {
    let path = e.path().to_string();
    let path = match (prefix, path.as_str()) {
        (p, ".") => p.to_string(),
        ("", rest) => rest.to_string(),
        (p, rest) => format!("{p}.{rest}"),
    };
    let join = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    let or = |default: &str| {
        if path.is_empty() {
            default.to_string()
        } else {
            path.clone()
        }
    };
    let BodyError { problem, message } = e.inner();
    match problem {
        Problem::UnknownField(name) => {
            // The path may already end at the unknown field.
            let field = if path == *name || path.ends_with(&format!(".{name}")) {
                path.clone()
            } else {
                join(name)
            };
            ApiError::field(
                Code::VALIDATION_UNKNOWN_FIELD,
                field,
                format!("is not a known field ({message})"),
            )
        }
        Problem::MissingField(name) => {
            ApiError::field(Code::VALIDATION_REQUIRED, join(name), "is required")
        }
        Problem::UnknownVariant => {
            ApiError::field(Code::VALIDATION_UNKNOWN_VALUE, or("type"), message.as_str())
        }
        Problem::Invalid => ApiError::field(Code::VALIDATION_TYPE, or("body"), message.as_str()),
    }
}

/// A borrowed JSON value as a serde [`Deserializer`].
#[derive(Clone, Copy)]
struct JsonValue<'de>(&'de Value);

/// An integer a whole float stands for.
enum Whole {
    Unsigned(u64),
    Signed(i64),
}

impl<'de> JsonValue<'de> {
    /// JSON has one kind of number: `2344.0` is the integer 2344 to JSON
    /// Schema (and so to the document's `integer` fields and the clients
    /// generated from it). A type that asks for an integer gets the whole
    /// float's integer; one that asks for anything (a free-form map such as
    /// `user_settings`) keeps the float. Past i64/u64 it stays a float, and
    /// the type's own error names the field.
    fn whole(self) -> Option<Whole> {
        let f = self.0.as_number().filter(|n| n.is_f64())?.as_f64()?;
        if f.fract() != 0.0 || !f.is_finite() {
            None
        } else if f < 0.0 && f >= i64::MIN as f64 {
            Some(Whole::Signed(f as i64))
        } else if f >= 0.0 && f < u64::MAX as f64 {
            Some(Whole::Unsigned(f as u64))
        } else {
            None
        }
    }

    fn deserialize_integer<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, BodyError> {
        match self.whole() {
            Some(Whole::Unsigned(n)) => visitor.visit_u64(n),
            Some(Whole::Signed(n)) => visitor.visit_i64(n),
            None => self.deserialize_any(visitor),
        }
    }

    fn unexpected(self) -> Unexpected<'de> {
        match self.0 {
            Value::Null => Unexpected::Unit,
            Value::Bool(b) => Unexpected::Bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => Unexpected::Unsigned(u),
                (None, Some(i), _) => Unexpected::Signed(i),
                (None, None, Some(f)) => Unexpected::Float(f),
                (None, None, None) => Unexpected::Other("number"),
            },
            Value::String(s) => Unexpected::Str(s),
            Value::Array(_) => Unexpected::Seq,
            Value::Object(_) => Unexpected::Map,
        }
    }
}

macro_rules! integers {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, BodyError> {
            self.deserialize_integer(visitor)
        }
    )*};
}

impl<'de> Deserializer<'de> for JsonValue<'de> {
    type Error = BodyError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, BodyError> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => visitor.visit_u64(u),
                (None, Some(i), _) => visitor.visit_i64(i),
                (None, None, Some(f)) => visitor.visit_f64(f),
                (None, None, None) => Err(de::Error::invalid_type(self.unexpected(), &visitor)),
            },
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => visit_array(items, visitor),
            Value::Object(map) => visit_object(map, visitor),
        }
    }

    integers! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, BodyError> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, BodyError> {
        visitor.visit_newtype_struct(self)
    }

    /// `"variant"` or `{"variant": content}`, as serde_json reads enums.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, BodyError> {
        match self.0 {
            Value::String(s) => visitor.visit_enum(BorrowedStrDeserializer::new(s)),
            Value::Object(map) => match map.iter().next() {
                Some((variant, content)) if map.len() == 1 => visitor.visit_enum(Variant {
                    name: variant,
                    content: JsonValue(content),
                }),
                _ => Err(de::Error::invalid_value(
                    Unexpected::Map,
                    &"map with a single key",
                )),
            },
            _ => Err(de::Error::invalid_type(self.unexpected(), &"string or map")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, BodyError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool f32 f64 char str string bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct identifier
    }
}

fn visit_array<'de, V: Visitor<'de>>(
    items: &'de [Value],
    visitor: V,
) -> Result<V::Value, BodyError> {
    let mut seq = SeqDeserializer::new(items.iter().map(JsonValue));
    let value = visitor.visit_seq(&mut seq)?;
    seq.end()?;
    Ok(value)
}

fn visit_object<'de, V: Visitor<'de>>(
    map: &'de Map<String, Value>,
    visitor: V,
) -> Result<V::Value, BodyError> {
    let entries = map.iter().map(|(k, v)| (BorrowedStr(k), JsonValue(v)));
    let mut map = MapDeserializer::new(entries);
    let value = visitor.visit_map(&mut map)?;
    map.end()?;
    Ok(value)
}

impl<'de> IntoDeserializer<'de, BodyError> for JsonValue<'de> {
    type Deserializer = JsonValue<'de>;

    fn into_deserializer(self) -> JsonValue<'de> {
        self
    }
}

/// A key, borrowed from the document.
struct BorrowedStr<'de>(&'de str);

impl<'de> IntoDeserializer<'de, BodyError> for BorrowedStr<'de> {
    type Deserializer = BorrowedStrDeserializer<'de, BodyError>;

    fn into_deserializer(self) -> Self::Deserializer {
        BorrowedStrDeserializer::new(self.0)
    }
}

/// The one entry of `{"variant": content}`.
struct Variant<'de> {
    name: &'de str,
    content: JsonValue<'de>,
}

impl<'de> EnumAccess<'de> for Variant<'de> {
    type Error = BodyError;
    type Variant = JsonValue<'de>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, JsonValue<'de>), BodyError> {
        let variant = seed.deserialize(BorrowedStrDeserializer::<BodyError>::new(self.name))?;
        Ok((variant, self.content))
    }
}

impl<'de> VariantAccess<'de> for JsonValue<'de> {
    type Error = BodyError;

    fn unit_variant(self) -> Result<(), BodyError> {
        match self.0 {
            Value::Null => Ok(()),
            _ => Err(de::Error::invalid_type(self.unexpected(), &"unit variant")),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, BodyError> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, BodyError> {
        match self.0 {
            Value::Array(items) => visit_array(items, visitor),
            _ => Err(de::Error::invalid_type(self.unexpected(), &"tuple variant")),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, BodyError> {
        match self.0 {
            Value::Object(map) => visit_object(map, visitor),
            _ => Err(de::Error::invalid_type(
                self.unexpected(),
                &"struct variant",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Storage {
        size_gb: u32,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Group {
        storage: Storage,
        count: u32,
        settings: BTreeMap<String, Value>,
    }

    /// Schemathesis found `2344.0` refused where the document says integer.
    #[test]
    fn a_whole_float_is_the_integer_it_equals() {
        let body = br#"{"storage":{"size_gb":1470.0},"count":3.0,"settings":{"ratio":1.0}}"#;
        let group: Group = parse_json(body).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(group.storage.size_gb, 1470);
        assert_eq!(group.count, 3);
        // A free-form map keeps its float.
        assert_eq!(group.settings["ratio"], serde_json::json!(1.0));
    }

    #[test]
    fn a_fraction_is_still_refused_naming_its_field() {
        let body = br#"{"storage":{"size_gb":1.5},"count":3,"settings":{}}"#;
        let err = parse_json::<Group>(body).err().map(|e| format!("{e:?}"));
        let err = err.unwrap_or_default();
        assert!(err.contains("storage.size_gb"), "{err}");
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Strict {
        storage: StrictStorage,
        kind: Kind,
        tags: Option<Vec<u32>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct StrictStorage {
        size_gb: u32,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        Hot,
    }

    fn refusal(body: &str) -> (String, Vec<String>, String) {
        match parse_json::<Strict>(body.as_bytes()) {
            Ok(s) => panic!("{body} was accepted: {s:?}"),
            Err(e) => (
                e.errors[0].code.clone(),
                e.errors[0].fields.clone(),
                e.errors[0].message.clone(),
            ),
        }
    }

    /// Each kind of failure comes from serde as a call, not as a sentence.
    #[test]
    fn every_kind_of_failure_names_its_field() {
        let (code, fields, message) =
            refusal(r#"{"storage":{"size_gb":1,"size_gib":2},"kind":"hot"}"#);
        assert_eq!(
            (code.as_str(), fields),
            (
                "validation.unknown_field",
                vec!["storage.size_gib".to_string()]
            )
        );
        assert!(message.contains("expected `size_gb`"), "{message}");
        let (code, fields, _) = refusal(r#"{"storage":{},"kind":"hot"}"#);
        assert_eq!(
            (code.as_str(), fields),
            ("validation.required", vec!["storage.size_gb".to_string()])
        );
        let (code, fields, _) = refusal(r#"{"storage":{"size_gb":1},"kind":"cold"}"#);
        assert_eq!(
            (code.as_str(), fields),
            ("validation.unknown_value", vec!["kind".to_string()])
        );
        let (code, fields, message) = refusal(r#"{"storage":{"size_gb":null},"kind":"hot"}"#);
        assert_eq!(
            (code.as_str(), fields),
            ("validation.type", vec!["storage.size_gb".to_string()])
        );
        assert_eq!(message, "storage.size_gb: invalid type: null, expected u32");
        let (code, fields, _) = refusal(r#"{"storage":{"size_gb":1},"kind":"hot","tags":[1,2.5]}"#);
        assert_eq!(
            (code.as_str(), fields),
            ("validation.type", vec!["tags[1]".to_string()])
        );
    }

    #[test]
    fn whole_floats_in_lists_and_options_are_integers_too() {
        let body = br#"{"storage":{"size_gb":-0.0},"kind":"hot","tags":[1.0,2]}"#;
        let strict: Strict = parse_json(body).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(strict.tags, Some(vec![1, 2]));
        assert_eq!(strict.storage.size_gb, 0);
    }
}
