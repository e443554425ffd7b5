//! Query parameters: the structs several operations share, and the
//! deserializers of parameter values. An operation's own parameters are a
//! struct beside its handler, built the same way:
//!
//! - `Deserialize` with `deny_unknown_fields`: the fields are the names a
//!   request may send ([`Params`](crate::extract::Params) refuses others);
//! - `IntoParams`, listed in the operation's `params(…)`: the same fields,
//!   with their doc comments, are the document's parameters;
//! - a value that is not plain text has a deserializer here, which refuses
//!   a bad value with the API's error code for it.

use crate::extract::refusing;
use floe_domain::Code;
use floe_store::stores::MAX_PAGE_SIZE;
use serde::{Deserialize, Deserializer};
use utoipa::IntoParams;

/// A list's page.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// Page size, 1 to 100 (default 20).
    #[serde(default, deserialize_with = "page_size")]
    #[param(minimum = 1, maximum = 100)]
    pub size: Option<u32>,
    /// `next_cursor` of the previous page. Opaque: only a `next_cursor` this API returned is a cursor (400 otherwise).
    pub cursor: Option<String>,
}

impl PageParams {
    pub fn page(self) -> floe_store::PageRequest {
        floe_store::PageRequest {
            size: self.size,
            cursor: self.cursor,
        }
    }
}

/// The precondition of a replace or delete, besides `If-Match`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct VersionParams {
    /// Same as If-Match (ECE). A version that is not the current one is 412; sent with If-Match, both must name the same version (400 otherwise).
    #[serde(default, deserialize_with = "version")]
    pub version: Option<u64>,
}

/// An operation that takes no query parameter: any one is refused.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct NoParams {}

/// A whole number written in digits (`2.0` and `1e2` are not); `None`
/// past `T`'s range.
fn whole<T: std::str::FromStr>(text: &str) -> Option<T> {
    text.parse().ok()
}

/// `size`: 1 to [`MAX_PAGE_SIZE`]; `validation.range` otherwise.
pub fn page_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    refusing(d, Code::VALIDATION_RANGE, |text| {
        whole::<u32>(text)
            .filter(|n| (1..=MAX_PAGE_SIZE).contains(n))
            .map(Some)
            .ok_or_else(|| format!("must be a whole number from 1 to {MAX_PAGE_SIZE}"))
    })
}

/// `true` or `false` (absent is false with `#[serde(default)]`);
/// `validation.boolean` otherwise.
pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    refusing(d, Code::VALIDATION_BOOLEAN, |text| match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("must be true or false".to_string()),
    })
}

/// `version`: a resource version, 0 to i64::MAX (versions are documented
/// as int64, as the clients generated from the document hold them; a
/// larger number is no version this API gave); `validation.version`
/// otherwise.
pub fn version<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    refusing(d, Code::VALIDATION_VERSION, |text| {
        match whole::<u64>(text) {
            Some(v) if v <= i64::MAX as u64 => Ok(Some(v)),
            Some(_) => Err(format!("must be a whole number from 0 to {}", i64::MAX)),
            None => Err("must be a whole number".to_string()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::{expected_version, parse_query};
    use axum::http::{HeaderMap, Uri};

    fn query<T: serde::de::DeserializeOwned>(q: &str) -> Result<T, crate::ApiError> {
        let uri: Uri = format!("/?{q}")
            .parse()
            .map_err(|_| crate::ApiError::internal())?;
        parse_query(&uri)
    }

    /// Schemathesis sent `?version=9223372036854775808` (past int64) and
    /// got 412 for a request the document says is malformed.
    #[test]
    fn a_version_past_int64_is_malformed() {
        let params = query::<VersionParams>("version=9223372036854775808");
        assert!(params.is_err());
        let params = query::<VersionParams>(&format!("version={}", i64::MAX));
        let version = params.ok().and_then(|p| p.version);
        assert_eq!(
            expected_version(&HeaderMap::new(), version).ok().flatten(),
            Some(i64::MAX as u64)
        );
    }

    fn refusal<T: serde::de::DeserializeOwned + std::fmt::Debug>(q: &str) -> (String, Vec<String>) {
        match query::<T>(q) {
            Ok(t) => panic!("{q} was accepted: {t:?}"),
            Err(e) => (e.errors[0].code.clone(), e.errors[0].fields.clone()),
        }
    }

    #[test]
    fn an_unknown_name_is_named_before_any_value_is_read() {
        let (code, fields) = refusal::<PageParams>("size=0&sise=5");
        assert_eq!(code, "validation.unknown_parameter");
        assert_eq!(fields, ["sise"]);
        let (code, fields) = refusal::<NoParams>("request_id=abc");
        assert_eq!(code, "validation.unknown_parameter");
        assert_eq!(fields, ["request_id"]);
    }

    #[test]
    fn a_value_is_refused_with_its_own_code() {
        for size in ["0", "101", "1.5", "2.0", "ten", ""] {
            let (code, fields) = refusal::<PageParams>(&format!("size={size}"));
            assert_eq!(
                (code.as_str(), fields),
                ("validation.range", vec!["size".to_string()])
            );
        }
        let (code, fields) = refusal::<VersionParams>("version=3.0");
        assert_eq!(
            (code.as_str(), fields),
            ("validation.version", vec!["version".to_string()])
        );
    }

    #[test]
    fn absent_and_repeated_parameters() -> Result<(), crate::ApiError> {
        let page = query::<PageParams>("")?.page();
        assert_eq!((page.size, page.cursor), (None, None));
        // A name sent twice counts once, with its last value.
        let page = query::<PageParams>("size=5&size=7&cursor=abc")?.page();
        assert_eq!((page.size, page.cursor.as_deref()), (Some(7), Some("abc")));
        Ok(())
    }
}
