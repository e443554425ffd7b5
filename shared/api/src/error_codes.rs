//! Writes the document's error descriptions from the one list of codes
//! ([`floe_domain::codes`]): the `code` field of an error item carries the
//! whole table (code, status, meaning), and every error response of every
//! operation names the codes answered with its status, or points at the
//! table where they are many. A code added to the list is documented
//! without another edit, and no description can name a code that is not.

use floe_domain::Code;
use floe_domain::codes::with_status;
use utoipa::openapi::{OpenApi, RefOr, schema::Schema};

/// Above this many codes, a response points at the table instead of
/// listing them (400 and 409 have dozens each).
const LISTED_AT_MOST: usize = 12;

/// The table of every code, as Markdown.
fn table() -> String {
    let mut out = String::from(
        "Stable, machine-readable code: clients branch on it, and a code is never renamed.\n\n\
         | code | status | meaning |\n|---|---|---|\n",
    );
    for code in Code::ALL {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            code.name(),
            code.status(),
            code.meaning().replace('|', "\\|")
        ));
    }
    out
}

/// What a response with `status` adds to its description.
fn codes_of(status: u16) -> Option<String> {
    let codes: Vec<Code> = with_status(status).collect();
    match codes.len() {
        0 => None,
        n if n > LISTED_AT_MOST => Some(format!(
            "`code` is one of the {n} codes with status {status} in the table of `ErrorItem.code`."
        )),
        _ => Some(format!(
            "Codes with this status: {}.",
            codes
                .iter()
                .map(|c| format!("`{}`", c.name()))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

pub(crate) fn document(doc: &mut OpenApi) {
    if let Some(RefOr::T(Schema::Object(item))) = doc
        .components
        .as_mut()
        .and_then(|c| c.schemas.get_mut("ErrorItem"))
        && let Some(RefOr::T(Schema::Object(code))) = item.properties.get_mut("code")
    {
        code.description = Some(table());
    }
    for operation in crate::links::operations_mut(doc) {
        for (status, response) in operation.responses.responses.iter_mut() {
            let Some(addition) = status.parse::<u16>().ok().and_then(codes_of) else {
                continue;
            };
            if let RefOr::T(response) = response
                && !response.description.contains(&addition)
            {
                response.description = format!("{} {addition}", response.description);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_in_the_table_and_every_error_status_is_described() {
        let doc = crate::openapi();
        let json = serde_json::to_value(&doc).unwrap_or_default();
        let described =
            json["components"]["schemas"]["ErrorItem"]["properties"]["code"]["description"]
                .as_str()
                .unwrap_or_default()
                .to_string();
        for code in Code::ALL {
            assert!(
                described.contains(&format!("| `{}` | {} |", code.name(), code.status())),
                "{} is not in the table",
                code.name()
            );
        }
        let mut checked = 0;
        for item in json["paths"]
            .as_object()
            .into_iter()
            .flat_map(|p| p.values())
        {
            for op in item.as_object().into_iter().flat_map(|o| o.values()) {
                for (status, response) in op["responses"].as_object().into_iter().flatten() {
                    let Some(addition) = status.parse().ok().and_then(codes_of) else {
                        continue;
                    };
                    let text = response["description"].as_str().unwrap_or_default();
                    assert!(text.ends_with(&addition), "{status}: {text}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 100, "only {checked} error responses described");
    }

    /// A code named by an operation (`family.reason` in backquotes, in its
    /// description, parameters or responses) is one the API answers. The
    /// schemas are left out: a plan's `operation` is named the same way.
    #[test]
    fn the_operations_name_no_code_that_is_not_in_the_list() {
        let json = serde_json::to_value(crate::openapi()).unwrap_or_default();
        let text = json["paths"].to_string();
        let families = [
            "auth",
            "request",
            "root",
            "validation",
            "deployments",
            "repositories",
            "policies",
            "snapshots",
            "restore",
            "proxy",
            "internal",
        ];
        let mut unknown = Vec::new();
        for quoted in text.split('`').skip(1).step_by(2) {
            let Some((family, reason)) = quoted.split_once('.') else {
                continue;
            };
            if families.contains(&family)
                && !reason.is_empty()
                && reason.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                && Code::find(quoted).is_none()
            {
                unknown.push(quoted.to_string());
            }
        }
        assert!(
            unknown.is_empty(),
            "codes named but not in the list: {unknown:?}"
        );
    }
}
