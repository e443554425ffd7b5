//! Path segments for Elasticsearch URLs.

use crate::error::ElasticError;

/// Percent-encodes a snapshot name (or any other name) for use as one path
/// segment of an Elasticsearch URL.
///
/// Everything but ASCII letters, digits, `-`, `.`, `_` and `~` is encoded,
/// byte by byte in UTF-8. That covers what Elasticsearch's date math
/// documentation requires (`<`, `>`, `{`, `}`, `/`, `|`, `+`, `:`, `,`): a
/// `/` would otherwise split the segment, a `+` would turn into a space, and
/// `{` and `|` are not allowed in a URL at all.
///
/// Date math such as `<nightly-{now/d}>` is sent as written, encoded
/// (`%3Cnightly-%7Bnow%2Fd%7D%3E`), and Elasticsearch resolves it when it
/// creates the snapshot, using its own clock. Floe predicts the resulting
/// name with [`floe_domain::snapshot_name::resolve_snapshot_name`]; the
/// prediction can miss when the request crosses a rounding boundary (such as
/// midnight) on its way, so the name a completed snapshot reports is the one
/// to keep.
pub fn encode_snapshot_name(name: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
    out
}

/// A name that could never address anything on its own: an empty segment
/// changes which API the URL reaches (`DELETE _snapshot/repo/` would
/// unregister the repository), and URL parsing folds `.` and `..` away.
fn check_segment(what: &str, name: &str) -> Result<(), ElasticError> {
    if name.is_empty() {
        return Err(ElasticError::invalid(format!("the {what} name is empty")));
    }
    if name == "." || name == ".." {
        return Err(ElasticError::invalid(format!(
            "the {what} name must not be '{name}'"
        )));
    }
    Ok(())
}

/// Encodes a name that must address exactly one repository or snapshot.
///
/// Elasticsearch reads `*`, `,` and names such as `_all` as patterns and
/// lists, so `DELETE _snapshot/repo/*` deletes every snapshot. No valid
/// repository or snapshot name contains them, so they are refused here
/// rather than sent.
pub(crate) fn exact_name(what: &str, name: &str) -> Result<String, ElasticError> {
    check_segment(what, name)?;
    if name.contains(['*', ',']) || name.starts_with('_') {
        return Err(ElasticError::invalid(format!(
            "the {what} name \"{name}\" would match more than one {what}"
        )));
    }
    Ok(encode_snapshot_name(name))
}

/// Encodes the name of a snapshot to create: date math is allowed, and
/// Elasticsearch itself reports any other problem with the name.
pub(crate) fn new_snapshot_name(name: &str) -> Result<String, ElasticError> {
    check_segment("snapshot", name)?;
    Ok(encode_snapshot_name(name))
}

/// Encodes a list of index names (patterns allowed) as one segment.
pub(crate) fn index_list(indices: &[String]) -> Result<String, ElasticError> {
    let mut encoded = Vec::with_capacity(indices.len());
    for index in indices {
        check_segment("index", index)?;
        encoded.push(encode_snapshot_name(index));
    }
    // The comma stays literal: it is what separates the names.
    Ok(encoded.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_math_is_encoded_as_elasticsearch_documents() {
        assert_eq!(
            encode_snapshot_name("<nightly-{now/d}>"),
            "%3Cnightly-%7Bnow%2Fd%7D%3E"
        );
        assert_eq!(
            encode_snapshot_name("<x-{now+1d/d{yyyy.MM.dd|+01:00}}>,y"),
            "%3Cx-%7Bnow%2B1d%2Fd%7Byyyy.MM.dd%7C%2B01%3A00%7D%7D%3E%2Cy"
        );
    }

    #[test]
    fn plain_names_pass_through_and_other_bytes_are_encoded() {
        assert_eq!(
            encode_snapshot_name("snap-2024.03.22_a~b"),
            "snap-2024.03.22_a~b"
        );
        assert_eq!(encode_snapshot_name("a b%c?d#e&f"), "a%20b%25c%3Fd%23e%26f");
        assert_eq!(encode_snapshot_name("é"), "%C3%A9");
        assert_eq!(encode_snapshot_name("*"), "%2A");
    }

    #[test]
    fn exact_names_refuse_what_would_match_several_things() {
        assert_eq!(
            exact_name("snapshot", "snap-1").ok().as_deref(),
            Some("snap-1")
        );
        for bad in ["", ".", "..", "*", "snap-*", "a,b", "_all", "_current"] {
            let error = exact_name("snapshot", bad);
            assert!(
                matches!(error, Err(ElasticError::InvalidArgument { .. })),
                "{bad:?}: {error:?}"
            );
        }
    }

    #[test]
    fn new_snapshot_names_allow_date_math_but_not_empty_segments() {
        assert_eq!(
            new_snapshot_name("<nightly-{now/d}>").ok().as_deref(),
            Some("%3Cnightly-%7Bnow%2Fd%7D%3E")
        );
        assert!(new_snapshot_name("").is_err());
        assert!(new_snapshot_name("..").is_err());
    }

    #[test]
    fn index_lists_keep_their_separating_commas() {
        let list = vec!["logs-*".to_string(), "a/b".to_string()];
        assert_eq!(index_list(&list).ok().as_deref(), Some("logs-%2A,a%2Fb"));
        assert!(index_list(&[String::new()]).is_err());
    }
}
