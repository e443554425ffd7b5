//! What a version of Elasticsearch says about itself (`GET /`): the Lucene
//! it embeds and the oldest versions it talks to and reads, and the REST
//! API compatibility headers it accepts
//! (`application/vnd.elasticsearch+json; compatible-with=N`), which the
//! official clients send.

use crate::error::ApiError;

/// What `GET /` reports beside the version number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionFacts {
    pub lucene: &'static str,
    pub minimum_wire_compatibility: &'static str,
    pub minimum_index_compatibility: &'static str,
}

/// The facts Elastic publishes for `version` (`major.minor.patch`): each
/// major talks to the last minor of the one before (7.17, 8.18 for 9.0,
/// 8.19 from 9.1 on) and reads indices made by the one before.
pub fn facts(version: &str) -> VersionFacts {
    let (major, minor) = major_minor(version).unwrap_or((8, 15));
    let lucene = match (major, minor) {
        (7, _) => "8.11.3",
        (8, 0..=6) => "9.4.2",
        (8, 7..=9) => "9.5.0",
        (8, 10) => "9.7.0",
        (8, 11) => "9.8.0",
        (8, 12) => "9.9.1",
        (8, 13) => "9.10.0",
        (8, 14..=15) => "9.11.1",
        (8, 16) => "9.12.0",
        (8, 17) => "9.12.0",
        (8, 18) => "9.12.1",
        (8, _) => "9.12.2",
        (9, 0) => "10.1.0",
        (9, 1) => "10.2.2",
        _ => "10.3.1",
    };
    let (wire, index) = match (major, minor) {
        (7, _) => ("6.8.0", "6.0.0-beta1"),
        (8, _) => ("7.17.0", "7.0.0"),
        (9, 0) => ("8.18.0", "8.0.0"),
        _ => ("8.19.0", "8.0.0"),
    };
    VersionFacts {
        lucene,
        minimum_wire_compatibility: wire,
        minimum_index_compatibility: index,
    }
}

/// `major.minor` of a `major.minor.patch` version.
pub fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The `compatible-with` version a media type asks for, if it is one of
/// Elasticsearch's vendor types (`application/vnd.elasticsearch+json`,
/// `+x-ndjson`, …) with that parameter. `Err` for a vendor type whose
/// parameter is not a number.
fn compatible_with(media_type: &str) -> Result<Option<u32>, ()> {
    let mut parts = media_type.split(';');
    let essence = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    if !essence.starts_with("application/vnd.elasticsearch+") {
        return Ok(None);
    }
    for parameter in parts {
        let Some((name, value)) = parameter.split_once('=') else {
            continue;
        };
        if name.trim().eq_ignore_ascii_case("compatible-with") {
            return value.trim().parse().map(Some).map_err(|_| ());
        }
    }
    Ok(None)
}

/// The REST API version a request asks to be answered in, checked as
/// Elasticsearch checks it: a `compatible-with` version on `Accept` or
/// `Content-Type` must be the node's major or the one before, and when
/// the request has a body, both headers must ask for the same one.
/// `Ok(None)`: the node's own version. The error is Elasticsearch's 400
/// `media_type_header_exception`.
pub fn requested_version(
    node_major: u32,
    accept: Option<&str>,
    content_type: Option<&str>,
    has_body: bool,
) -> Result<Option<u32>, ApiError> {
    let refuse = |why: String| {
        Err(ApiError::media_type_header(
            "Invalid media-type value on headers [Accept, Content-Type]",
        )
        .caused_by("status_exception", &why))
    };
    let allowed = |v: u32| v == node_major || v + 1 == node_major;
    let bad_version = |header: &str, value: &str, v: u32| {
        format!(
            "{header} version must be either version {node_major} or {}, but found {v}. {header}={value}",
            node_major.saturating_sub(1)
        )
    };
    let accept_version = match accept {
        Some(value) => match compatible_with(value) {
            Ok(v) => v,
            Err(()) => return refuse(format!("Invalid compatible-with value. Accept={value}")),
        },
        None => None,
    };
    if let (Some(v), Some(value)) = (accept_version, accept)
        && !allowed(v)
    {
        return refuse(bad_version("Accept", value, v));
    }
    let content_type = content_type.filter(|_| has_body);
    let content_version = match content_type {
        Some(value) => match compatible_with(value) {
            Ok(v) => v,
            Err(()) => {
                return refuse(format!(
                    "Invalid compatible-with value. Content-Type={value}"
                ));
            }
        },
        None => None,
    };
    if let (Some(v), Some(value)) = (content_version, content_type)
        && !allowed(v)
    {
        return refuse(bad_version("Content-Type", value, v));
    }
    if let Some(content_type) = content_type
        && (accept_version.is_some() || content_version.is_some())
        && accept_version != content_version
        // Without `Accept`, the body's version is the answer's.
        && accept.is_some()
    {
        return refuse(format!(
            "A compatible version is required on both Content-Type and Accept headers if either one has requested a compatible version and the compatible versions must match. Accept={}, Content-Type={content_type}",
            accept.unwrap_or_default()
        ));
    }
    Ok(accept_version.or(content_version))
}

#[cfg(test)]
mod tests {
    use super::{facts, requested_version};

    #[test]
    fn each_major_reports_the_versions_it_is_compatible_with() {
        assert_eq!(facts("8.15.3").minimum_wire_compatibility, "7.17.0");
        assert_eq!(facts("8.15.3").minimum_index_compatibility, "7.0.0");
        assert_eq!(facts("9.0.4").minimum_wire_compatibility, "8.18.0");
        assert_eq!(facts("9.1.0").minimum_wire_compatibility, "8.19.0");
        assert_eq!(facts("9.1.0").minimum_index_compatibility, "8.0.0");
        assert_eq!(facts("9.1.0").lucene, "10.2.2");
    }

    #[test]
    fn a_node_answers_its_own_major_and_the_one_before() {
        let v8 = "application/vnd.elasticsearch+json; compatible-with=8";
        let v9 = "application/vnd.elasticsearch+json; compatible-with=9";
        let v7 = "application/vnd.elasticsearch+json;compatible-with=7";
        assert_eq!(
            requested_version(8, Some(v8), Some(v8), true).ok(),
            Some(Some(8))
        );
        assert_eq!(
            requested_version(8, Some(v7), Some(v7), true).ok(),
            Some(Some(7))
        );
        assert_eq!(
            requested_version(9, Some(v8), None, false).ok(),
            Some(Some(8))
        );
        assert_eq!(
            requested_version(8, Some("application/json"), None, false).ok(),
            Some(None)
        );
        assert_eq!(requested_version(8, None, None, false).ok(), Some(None));
        // A body's Content-Type is ignored without a body.
        assert_eq!(
            requested_version(8, Some(v8), Some("application/json"), false).ok(),
            Some(Some(8))
        );

        let refused = requested_version(8, Some(v9), None, false)
            .err()
            .map(|e| e.body());
        let refused = refused.unwrap_or_default();
        assert_eq!(refused["error"]["type"], "media_type_header_exception");
        assert_eq!(refused["status"], 400);
        assert_eq!(
            refused["error"]["caused_by"]["reason"],
            format!("Accept version must be either version 8 or 7, but found 9. Accept={v9}")
        );
        let mismatched = requested_version(8, Some(v8), Some("application/json"), true);
        assert!(mismatched.is_err());
        assert!(requested_version(9, Some(v9), Some(v8), true).is_err());
        assert!(
            requested_version(
                9,
                Some("application/vnd.elasticsearch+json; compatible-with=x"),
                None,
                false
            )
            .is_err()
        );
    }
}
