//! The provider's HTTP client of Floe's API: one credential, JSON in and
//! out, the API's error body read into its items so that a diagnostic can
//! name the code, the message and the field.

use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::fmt;
use std::time::Duration;

/// How the provider proves who it acts for.
#[derive(Clone)]
pub enum Credential {
    /// `Authorization: ApiKey {key}`: what a pipeline should use.
    ApiKey(String),
    /// `Authorization: Bearer {token}`: a token from the platform's issuer.
    Token(String),
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    credential: Credential,
}

/// One item of the API's error body, `{"errors":[{code,message,fields}]}`.
#[derive(Debug, Clone)]
pub struct ErrorItem {
    pub code: String,
    pub message: String,
    pub fields: Vec<String>,
}

/// Why a call did not succeed.
#[derive(Debug)]
pub enum CallError {
    /// No answer (connection refused, timeout, unreadable body).
    Transport(String),
    /// The API answered with a status of 400 or more.
    Api {
        status: u16,
        errors: Vec<ErrorItem>,
        body: String,
    },
}

impl CallError {
    pub fn status(&self) -> Option<u16> {
        match self {
            CallError::Api { status, .. } => Some(*status),
            CallError::Transport(_) => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// The API's error items (none for a transport failure).
    pub fn items(&self) -> &[ErrorItem] {
        match self {
            CallError::Api { errors, .. } => errors,
            CallError::Transport(_) => &[],
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Transport(e) => write!(f, "the Floe API did not answer: {e}"),
            CallError::Api {
                status,
                errors,
                body,
            } if errors.is_empty() => {
                write!(f, "the Floe API answered {status}: {body}")
            }
            CallError::Api { status, errors, .. } => {
                write!(f, "the Floe API answered {status}:")?;
                for e in errors {
                    write!(f, " {} ({})", e.message, e.code)?;
                    if !e.fields.is_empty() {
                        write!(f, " [field {}]", e.fields.join(", "))?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// A successful answer's body.
pub struct Answer {
    pub body: Value,
}

/// Attempts of a call the API asked to slow down (429) or that met a
/// gateway error (502-504): API Gateway throttles bursts, and `terraform
/// apply` makes many calls at once.
const ATTEMPTS: u32 = 5;

impl Client {
    pub fn new(base: &str, credential: Credential) -> Result<Client, String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!(
                "terraform-provider-floe/",
                env!("CARGO_PKG_VERSION")
            ))
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(Client {
            http,
            base: base.trim_end_matches('/').to_string(),
            credential,
        })
    }

    /// `method path` with `body`, and `If-Match` when `version` is given.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        version: Option<i64>,
    ) -> Result<Answer, CallError> {
        self.send(method, path, body, version, None).await
    }

    /// A create that a retry cannot make twice: one `Idempotency-Key` for
    /// every attempt, so that an answer lost to a gateway error (and tried
    /// again) answers the first create's result.
    pub async fn create(&self, path: &str, body: &Value) -> Result<Answer, CallError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let key = format!("terraform-{nanos:x}-{:x}", std::process::id());
        self.send(Method::POST, path, Some(body), None, Some(&key))
            .await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        version: Option<i64>,
        idempotency_key: Option<&str>,
    ) -> Result<Answer, CallError> {
        let url = format!("{}{path}", self.base);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut req = self.http.request(method.clone(), &url);
            req = match &self.credential {
                Credential::ApiKey(k) => {
                    req.header(reqwest::header::AUTHORIZATION, format!("ApiKey {k}"))
                }
                Credential::Token(t) => req.bearer_auth(t),
            };
            if let Some(v) = version {
                req = req.header(reqwest::header::IF_MATCH, format!("\"{v}\""));
            }
            if let Some(k) = idempotency_key {
                req = req.header("Idempotency-Key", k);
            }
            if let Some(b) = body {
                req = req.json(b);
            }
            let res = req
                .send()
                .await
                .map_err(|e| CallError::Transport(format!("{method} {url}: {e}")))?;
            let status = res.status();
            let retry_after = res
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok());
            let text = res.text().await.map_err(|e| {
                CallError::Transport(format!("{method} {url}: reading the answer: {e}"))
            })?;
            let busy =
                status == StatusCode::TOO_MANY_REQUESTS || matches!(status.as_u16(), 502..=504);
            if busy && attempt < ATTEMPTS {
                let wait = retry_after.unwrap_or(1 << attempt).min(30);
                crate::log::info(format!("{method} {path}: {status}, again in {wait} s"));
                tokio::time::sleep(Duration::from_secs(wait)).await;
                continue;
            }
            if status.as_u16() >= 400 {
                return Err(CallError::Api {
                    status: status.as_u16(),
                    errors: error_items(&text),
                    body: text,
                });
            }
            let body = if text.trim().is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text).map_err(|e| {
                    CallError::Transport(format!(
                        "{method} {url} answered {status} with no JSON: {e}"
                    ))
                })?
            };
            return Ok(Answer { body });
        }
    }

    pub async fn get(&self, path: &str) -> Result<Value, CallError> {
        Ok(self.call(Method::GET, path, None, None).await?.body)
    }

    /// A resource that may be gone: `None` on 404.
    pub async fn get_optional(&self, path: &str) -> Result<Option<Value>, CallError> {
        match self.get(path).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every page of a list: `field`'s items, following `next_cursor`.
    pub async fn list_all(&self, path: &str, field: &str) -> Result<Vec<Value>, CallError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page_path = match &cursor {
                Some(c) => format!("{path}{sep}size=100&cursor={}", encode(c)),
                None => format!("{path}{sep}size=100"),
            };
            let page = self.get(&page_path).await?;
            if let Some(list) = page[field].as_array() {
                items.extend(list.iter().cloned());
            }
            match page["next_cursor"].as_str() {
                Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
                _ => return Ok(items),
            }
        }
    }
}

fn error_items(body: &str) -> Vec<ErrorItem> {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return Vec::new();
    };
    let text = |e: &Value, k: &str| e[k].as_str().unwrap_or_default().to_string();
    v["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| ErrorItem {
            code: text(e, "code"),
            message: text(e, "message"),
            fields: e["fields"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect(),
        })
        .collect()
}

/// Percent-encodes a path segment or query value.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
