//! Where the API is, who the caller is, and one HTTP call with the API's
//! errors turned into something an operator can read.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How a command ends, and the exit status that says so.
#[derive(Debug)]
pub enum Failure {
    /// Bad arguments, configuration or input files.
    Usage(String),
    /// The API answered with an error.
    Api {
        status: u16,
        errors: Vec<ApiError>,
        body: String,
    },
    /// The API could not be reached (or its answer not read).
    Unreachable(String),
    PlanFailed(String),
    PlanCancelled(String),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Api { .. } => 1,
            Failure::Usage(_) => 2,
            Failure::Unreachable(_) => 3,
            Failure::PlanFailed(_) => 4,
            Failure::PlanCancelled(_) => 5,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Usage(m) => write!(f, "error: {m}"),
            Failure::Unreachable(m) => write!(f, "error: the API cannot be reached: {m}"),
            Failure::PlanFailed(m) => write!(f, "plan failed: {m}"),
            Failure::PlanCancelled(m) => write!(f, "plan cancelled: {m}"),
            Failure::Api {
                status,
                errors,
                body,
            } => {
                if errors.is_empty() {
                    return write!(f, "error: HTTP {status}: {}", body.trim());
                }
                for (i, e) in errors.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "error: HTTP {status} {}: {}", e.code, e.message)?;
                    if !e.fields.is_empty() {
                        write!(f, " (fields: {})", e.fields.join(", "))?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// One item of the API's error body, `{"errors":[{code,message,fields}]}`.
#[derive(Debug)]
pub struct ApiError {
    pub code: String,
    pub message: String,
    pub fields: Vec<String>,
}

fn api_errors(body: &str) -> Vec<ApiError> {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return Vec::new();
    };
    let text = |e: &Value, k: &str| e[k].as_str().unwrap_or_default().to_string();
    v["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| ApiError {
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

/// The API's address and the caller's credential, from flags, the
/// environment (`FLOE_API_URL`, `FLOE_TOKEN`, `FLOE_API_KEY`) or the config
/// file, in that order.
pub struct Settings {
    pub api_url: String,
    pub credential: Option<Credential>,
}

/// How the CLI proves who it acts for.
pub enum Credential {
    /// `Authorization: Bearer {token}`.
    Token(String),
    /// `Authorization: ApiKey {key}`.
    ApiKey(String),
}

/// `$XDG_CONFIG_HOME/floe/config.toml`, else `~/.config/floe/config.toml`.
fn default_config() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("floe/config.toml"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/floe/config.toml"))
}

/// The `key = "value"` lines of the config file (the subset of TOML it
/// needs: `api_url`, and `token` or `api_key`).
fn read_config(path: &Path, explicit: bool) -> Result<Vec<(String, String)>, Failure> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => return Ok(Vec::new()),
        Err(e) => {
            return Err(Failure::Usage(format!(
                "cannot read config file {}: {e}",
                path.display()
            )));
        }
    };
    check_mode(path)?;
    let mut pairs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(Failure::Usage(format!(
                "{}:{}: expected key = \"value\"",
                path.display(),
                n + 1
            )));
        };
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(v);
        pairs.push((k.trim().to_string(), v.to_string()));
    }
    Ok(pairs)
}

/// The file holds a token: only its owner may read it (as ssh does with
/// keys).
#[cfg(unix)]
fn check_mode(path: &Path) -> Result<(), Failure> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map(|m| m.permissions().mode())
        .map_err(|e| Failure::Usage(format!("cannot stat {}: {e}", path.display())))?;
    if mode & 0o077 != 0 {
        return Err(Failure::Usage(format!(
            "config file {} is open to other users (mode {:o}); run chmod 600 on it",
            path.display(),
            mode & 0o777
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_mode(_: &Path) -> Result<(), Failure> {
    Ok(())
}

impl Settings {
    /// The first credential found wins: `--token`, `--api-key`,
    /// `FLOE_TOKEN`, `FLOE_API_KEY`, then the file's `token` or `api_key`.
    pub fn resolve(
        api_url: Option<String>,
        token: Option<String>,
        api_key: Option<String>,
        config: Option<PathBuf>,
    ) -> Result<Settings, Failure> {
        if token.is_some() && api_key.is_some() {
            return Err(Failure::Usage(
                "--token and --api-key: give one of them".into(),
            ));
        }
        let explicit = config.is_some();
        let file = match config.or_else(default_config) {
            Some(p) => read_config(&p, explicit)?,
            None => Vec::new(),
        };
        let from_file = |key: &str| {
            file.iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let env = |key: &str| std::env::var(key).ok().filter(|v| !v.is_empty());
        let api_url = api_url
            .or_else(|| env("FLOE_API_URL"))
            .or_else(|| from_file("api_url"))
            .ok_or_else(|| {
                Failure::Usage(
                    "no API URL: pass --api-url, set FLOE_API_URL or api_url in the config file"
                        .into(),
                )
            })?;
        let credential = token
            .map(Credential::Token)
            .or_else(|| api_key.map(Credential::ApiKey))
            .or_else(|| env("FLOE_TOKEN").map(Credential::Token))
            .or_else(|| env("FLOE_API_KEY").map(Credential::ApiKey))
            .or_else(|| from_file("token").map(Credential::Token))
            .or_else(|| from_file("api_key").map(Credential::ApiKey));
        // Either the server's root or its /api/v1: paths are added to the root.
        let api_url = api_url.trim_end_matches('/');
        let api_url = api_url.strip_suffix("/api/v1").unwrap_or(api_url);
        Ok(Settings {
            api_url: api_url.to_string(),
            credential,
        })
    }
}

pub struct Client {
    http: reqwest::Client,
    settings: Settings,
}

/// An answer the API gave with a success status.
pub struct Answer {
    pub body: Value,
}

impl Client {
    pub fn new(settings: Settings) -> Result<Client, Failure> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("floe-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Failure::Usage(format!("cannot make an HTTP client: {e}")))?;
        Ok(Client { http, settings })
    }

    /// `method path` with `body` and `headers`; a status of 400 or more is
    /// the API's error.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, String)],
    ) -> Result<Answer, Failure> {
        let url = format!("{}{path}", self.settings.api_url);
        let mut req = self.http.request(method, &url);
        match &self.settings.credential {
            Some(Credential::Token(t)) => req = req.bearer_auth(t),
            Some(Credential::ApiKey(k)) => {
                req = req.header(reqwest::header::AUTHORIZATION, format!("ApiKey {k}"));
            }
            None => {}
        }
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let res = req
            .send()
            .await
            .map_err(|e| Failure::Unreachable(format!("{url}: {e}")))?;
        let status = res.status().as_u16();
        let text = res
            .text()
            .await
            .map_err(|e| Failure::Unreachable(format!("{url}: reading the answer: {e}")))?;
        if status >= 400 {
            return Err(Failure::Api {
                status,
                errors: api_errors(&text),
                body: text,
            });
        }
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).map_err(|e| {
                Failure::Unreachable(format!("{url} answered {status} with no JSON: {e}"))
            })?
        };
        Ok(Answer { body })
    }

    pub async fn get(&self, path: &str) -> Result<Value, Failure> {
        Ok(self.call(reqwest::Method::GET, path, None, &[]).await?.body)
    }

    /// Every page of a list: `field`'s items, following `next_cursor`.
    pub async fn list_all(&self, path: &str, field: &str) -> Result<Value, Failure> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page_path = match &cursor {
                Some(c) => format!("{path}{sep}size=100&cursor={}", encode(c)),
                None => format!("{path}{sep}size=100"),
            };
            let page = self.get(&page_path).await?;
            items.extend(page[field].as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
                _ => break,
            }
        }
        Ok(serde_json::json!({ field: items }))
    }
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
