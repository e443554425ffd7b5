//! Names that end up in DNS labels, EC2 tags, Elasticsearch cluster names and
//! storage keys. One strict rule for all of them keeps every one of those
//! places safe (no `/`, `..`, spaces or `#`, which is the store's separator).

pub const MAX_NAME_LEN: usize = 63;

/// DNS-label-like: 1–63 characters of `a-z`, `0-9` and `-`, starting and
/// ending with a letter or digit.
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "must be at most {MAX_NAME_LEN} characters (got {})",
            name.chars().count()
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err("may contain only lower-case letters, digits and '-'".into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("must start and end with a letter or a digit".into());
    }
    Ok(())
}

/// Organization ids come from tokens; the same characters as names plus `_`.
pub fn validate_org(org: &str) -> Result<(), String> {
    if org.is_empty() || org.len() > 64 {
        return Err("must be 1 to 64 characters".into());
    }
    if !org
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    {
        return Err("may contain only lower-case letters, digits, '-' and '_'".into());
    }
    Ok(())
}

/// Resource ids Floe generates: 32 lower-case hex digits (a UUID v7 without
/// dashes, so ids sort by creation time, as ECE's do not but lists want).
pub fn is_resource_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub fn new_resource_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "prod-logs", "x1", &"a".repeat(63)] {
            assert_eq!(validate_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "a/b",
            "..",
            "a b",
            "Prod",
            "-a",
            "a-",
            "a#b",
            "a.b",
            &"a".repeat(64),
            &"a".repeat(300),
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ids() {
        let a = new_resource_id();
        let b = new_resource_id();
        assert!(is_resource_id(&a) && is_resource_id(&b));
        assert!(a < b || a[..12] == b[..12], "v7 ids sort by time");
        assert!(!is_resource_id("../etc"));
        assert!(!is_resource_id(&a.to_uppercase()));
    }
}
