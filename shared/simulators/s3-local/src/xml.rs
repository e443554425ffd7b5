//! S3's XML: written by hand (the documents are flat and few), and read into
//! a small tree for the two request bodies that carry lists
//! (`CompleteMultipartUpload`, `Delete`).

use crate::error::{ErrorCode, S3Error};

pub(crate) const NAMESPACE: &str = "http://s3.amazonaws.com/doc/2006-03-01/";

/// Appends `<name>escaped text</name>`.
pub(crate) fn element(out: &mut String, name: &str, text: &str) {
    out.push('<');
    out.push_str(name);
    out.push('>');
    escape_into(out, text);
    out.push_str("</");
    out.push_str(name);
    out.push('>');
}

pub(crate) fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 cannot carry most control characters even escaped as
            // entities; S3 keys may hold them, so they are written as
            // character references, which clients decode.
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' && c != '\r' => {
                out.push_str(&format!("&#x{:X};", c as u32));
            }
            c => out.push(c),
        }
    }
}

/// An element of a parsed request body: local name (namespace prefixes are
/// irrelevant to S3), text content and child elements.
#[derive(Debug, Default)]
pub(crate) struct Element {
    pub(crate) name: String,
    pub(crate) text: String,
    pub(crate) children: Vec<Element>,
}

impl Element {
    pub(crate) fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> {
        self.children.iter().filter(move |c| c.name == name)
    }

    pub(crate) fn child_text(&self, name: &str) -> Option<&str> {
        self.children
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.text.as_str())
    }
}

/// Deeper documents are not S3 request bodies; the limit keeps a hostile one
/// from costing anything.
const MAX_DEPTH: usize = 16;

fn malformed() -> S3Error {
    S3Error::new(
        ErrorCode::MalformedXML,
        "The XML you provided was not well-formed or did not validate against our published schema.",
    )
}

/// Parses a whole document into its root element.
pub(crate) fn parse(document: &str) -> Result<Element, S3Error> {
    use xmlparser::{ElementEnd, Token};
    // The stack of open elements; built without recursion.
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    for token in xmlparser::Tokenizer::from(document) {
        let token = token.map_err(|_| malformed())?;
        match token {
            Token::ElementStart { local, .. } => {
                if root.is_some() || stack.len() >= MAX_DEPTH {
                    return Err(malformed());
                }
                stack.push(Element {
                    name: local.as_str().to_string(),
                    ..Element::default()
                });
            }
            Token::ElementEnd { end, .. } => match end {
                ElementEnd::Open => {}
                ElementEnd::Close(_, local) => {
                    let element = stack.pop().ok_or_else(malformed)?;
                    if element.name != local.as_str() {
                        return Err(malformed());
                    }
                    close(&mut stack, &mut root, element);
                }
                ElementEnd::Empty => {
                    let element = stack.pop().ok_or_else(malformed)?;
                    close(&mut stack, &mut root, element);
                }
            },
            Token::Text { text } => {
                if let Some(open) = stack.last_mut() {
                    unescape_into(&mut open.text, text.as_str())?;
                }
            }
            Token::Cdata { text, .. } => {
                if let Some(open) = stack.last_mut() {
                    open.text.push_str(text.as_str());
                }
            }
            // Declarations, comments, processing instructions, attributes
            // (S3 request bodies carry none that matter).
            _ => {}
        }
    }
    if !stack.is_empty() {
        return Err(malformed());
    }
    root.ok_or_else(malformed)
}

fn close(stack: &mut [Element], root: &mut Option<Element>, element: Element) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(element),
        None => *root = Some(element),
    }
}

fn unescape_into(out: &mut String, text: &str) -> Result<(), S3Error> {
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp + 1..];
        let semi = rest.find(';').ok_or_else(malformed)?;
        let entity = &rest[..semi];
        rest = &rest[semi + 1..];
        let c = match entity {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = if let Some(hex) = entity.strip_prefix("#x") {
                    u32::from_str_radix(hex, 16).ok()
                } else if let Some(dec) = entity.strip_prefix('#') {
                    dec.parse().ok()
                } else {
                    None
                };
                code.and_then(char::from_u32).ok_or_else(malformed)?
            }
        };
        out.push(c);
    }
    out.push_str(rest);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_delete_body_with_namespace_and_entities() {
        let doc = r#"<?xml version="1.0" encoding="UTF-8"?>
            <Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
              <Object><Key>a&amp;b&#x41;</Key></Object>
              <Object><Key><![CDATA[c<d]]></Key></Object>
              <Quiet>true</Quiet>
            </Delete>"#;
        let root = parse(doc).expect("parses");
        assert_eq!(root.name, "Delete");
        let keys: Vec<_> = root
            .children_named("Object")
            .filter_map(|o| o.child_text("Key"))
            .collect();
        assert_eq!(keys, ["a&bA", "c<d"]);
        assert_eq!(root.child_text("Quiet"), Some("true"));
    }

    #[test]
    fn refuses_broken_documents() {
        for doc in [
            "",
            "<a>",
            "<a></b>",
            "<a>&bogus;</a>",
            "<a/><b/>",
            &"<a>".repeat(40),
        ] {
            assert!(parse(doc).is_err(), "{doc:?}");
        }
    }

    #[test]
    fn escapes_text() {
        let mut out = String::new();
        element(&mut out, "Key", "a<b>&\"'\u{1}");
        assert_eq!(out, "<Key>a&lt;b&gt;&amp;&quot;&apos;&#x1;</Key>");
    }
}
