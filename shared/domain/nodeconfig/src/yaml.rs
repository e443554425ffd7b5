//! Just enough YAML writing for `elasticsearch.yml`: one `key: value` per
//! line, where nothing a user sends can end a line or a quoted scalar.

use serde_json::Value;

/// A double-quoted YAML scalar. Besides the quote and the backslash, every
/// character YAML treats as a line break (`\n`, `\r`, NEL, LS, PS) or may not
/// hold unescaped (C0/C1 controls, DEL, BOM, non-characters) is escaped, so
/// the scalar always ends on its own line. The escapes used are shared with
/// JSON, so a quoted value is also the value's JSON form.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control()
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A mapping key: plain when it is a dotted setting name, which YAML can
/// never read as anything but that string; quoted otherwise (a bare `on` or
/// `null` would not stay a string in YAML 1.1, which Elasticsearch's parser
/// follows).
pub(crate) fn yaml_key(key: &str) -> String {
    let plain = key.contains('.')
        && key.starts_with(|c: char| c.is_ascii_alphabetic())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if plain { key.to_string() } else { quote(key) }
}

/// A JSON value in YAML flow style: scalars and lists are valid YAML as JSON
/// writes them; strings go through [`quote`].
pub(crate) fn yaml_value(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(yaml_value).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", quote(k), yaml_value(v)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quoting_escapes_everything_that_could_end_the_scalar() {
        assert_eq!(quote("plain"), "\"plain\"");
        assert_eq!(quote(""), "\"\"");
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quote("a\nb\rc\td"), "\"a\\nb\\rc\\td\"");
        assert_eq!(quote("\u{0}\u{1b}\u{7f}"), "\"\\u0000\\u001b\\u007f\"");
        assert_eq!(quote("\u{85}\u{2028}\u{2029}"), "\"\\u0085\\u2028\\u2029\"");
        assert_eq!(quote("\u{feff}x"), "\"\\ufeffx\"");
        assert_eq!(quote("$HOME ${X} `id` 'q'"), "\"$HOME ${X} `id` 'q'\"");
        assert_eq!(quote("grüße 🚀"), "\"grüße 🚀\"");
    }

    #[test]
    fn quoted_strings_are_json_strings() {
        for s in [
            "a\"b",
            "line\nbreak",
            "\u{1}\u{85}\u{2028}",
            "tab\there",
            "ü",
        ] {
            let back: Option<String> = serde_json::from_str(&quote(s)).ok();
            assert_eq!(back.as_deref(), Some(s));
        }
    }

    #[test]
    fn keys_are_plain_only_when_unambiguous() {
        assert_eq!(
            yaml_key("thread_pool.snapshot.max"),
            "thread_pool.snapshot.max"
        );
        assert_eq!(yaml_key("a-b.c_d.e1"), "a-b.c_d.e1");
        assert_eq!(yaml_key("on"), "\"on\"");
        assert_eq!(yaml_key("null"), "\"null\"");
        assert_eq!(yaml_key("1.5"), "\"1.5\"");
        assert_eq!(yaml_key(".inf"), "\".inf\"");
        assert_eq!(yaml_key("a.b: c"), "\"a.b: c\"");
        assert_eq!(
            yaml_key("a.tag.floe:deployment"),
            "\"a.tag.floe:deployment\""
        );
        assert_eq!(yaml_key("a.b\nc.d"), "\"a.b\\nc.d\"");
        assert_eq!(yaml_key(""), "\"\"");
    }

    #[test]
    fn values_render_in_flow_style() {
        assert_eq!(yaml_value(&json!(8)), "8");
        assert_eq!(yaml_value(&json!(-2.5)), "-2.5");
        assert_eq!(yaml_value(&json!(true)), "true");
        assert_eq!(yaml_value(&json!(null)), "null");
        assert_eq!(yaml_value(&json!("8")), "\"8\"");
        assert_eq!(yaml_value(&json!([])), "[]");
        assert_eq!(yaml_value(&json!(["a", 1, [true]])), "[\"a\", 1, [true]]");
        assert_eq!(
            yaml_value(&json!({"a": 1, "b": "x\ny"})),
            "{\"a\": 1, \"b\": \"x\\ny\"}"
        );
    }
}
