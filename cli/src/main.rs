//! `floe`: the operators' command line for Floe's HTTP API.
//!
//! It talks to the API over HTTP only (no Floe crate is linked), so it
//! works against any Floe: local mode or a deployed stack. Exit status: 0
//! success, 1 an API error, 2 a usage or configuration error, 3 the API
//! unreachable, 4 a tracked plan failed, 5 a tracked plan was cancelled.

mod client;
mod track;

use client::{Client, Failure, Settings, encode};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "\
floe: the command line of Floe's API

usage: floe [global options] <resource> <action> [arguments] [options]

  deployment create -f SPEC.json [--idempotency-key K] [--validate-only] [--track]
  deployment list [--name PREFIX] [--status STATUS]
  deployment show ID
  deployment update ID -f SPEC.json [--if-match VERSION|current] [--validate-only] [--track]
  deployment shutdown ID [--skip-snapshot] [--track]
  deployment delete ID [--if-match VERSION]
  deployment clone SOURCE --name NAME [--instance-type TYPE] [--snapshot NAME]
                   [--mode restore|mount] [--license trial]
                   [--idempotency-key K] [--track]
  snapshot take DEPLOYMENT [--name NAME] [--wait]
  snapshot list DEPLOYMENT
  snapshot delete DEPLOYMENT NAME
  drill run DEPLOYMENT [--mode restore|mount] [--instance-type TYPE]
            [--license trial] [-f DRILL.json] [--track]
  drill list DEPLOYMENT
  repository put NAME -f REPOSITORY.json [--if-match VERSION]
  repository list | show NAME | delete NAME [--if-match VERSION]
  policy create -f POLICY.json
  policy list | show ID | delete ID [--if-match VERSION]
  policy update ID -f POLICY.json [--if-match VERSION|current]
  license put -f LICENSE.json | show | delete
  auth key create --description TEXT [--expiration 90d] [--roles ROLE,ROLE]
  auth key list [--all]
  auth key delete ID [--user USER_ID]
  plan show DEPLOYMENT
  plan cancel DEPLOYMENT [--force] [--track]

global options:
  --api-url URL      the API (else FLOE_API_URL, else api_url in the config file)
  --token TOKEN      a bearer token (else FLOE_TOKEN, else token in the config file)
  --api-key KEY      an API key instead (else FLOE_API_KEY, else api_key in the config file)
  --config PATH      the config file (default ~/.config/floe/config.toml; mode 600)
  -o, --output json|text   (default text)

exit status: 0 success, 1 API error, 2 usage, 3 API unreachable,
             4 tracked plan failed, 5 tracked plan cancelled
";

/// Options that take a value; every other `--name` is a switch.
const VALUED: &[&str] = &[
    "api-url",
    "token",
    "api-key",
    "description",
    "expiration",
    "roles",
    "user",
    "config",
    "output",
    "file",
    "idempotency-key",
    "if-match",
    "name",
    "instance-type",
    "snapshot",
    "mode",
    "license",
    "status",
    "poll-ms",
];
const SWITCHES: &[&str] = &[
    "track",
    "skip-snapshot",
    "validate-only",
    "wait",
    "force",
    "all",
    "help",
];

/// The command line: positional words and options.
struct Args {
    words: Vec<String>,
    opts: BTreeMap<String, String>,
}

impl Args {
    fn parse(raw: impl Iterator<Item = String>) -> Result<Args, Failure> {
        let mut words = Vec::new();
        let mut opts = BTreeMap::new();
        let mut raw = raw.peekable();
        while let Some(a) = raw.next() {
            let name = match a.as_str() {
                "-f" => "file".to_string(),
                "-o" => "output".to_string(),
                "-h" => "help".to_string(),
                "--" => {
                    words.extend(raw.by_ref());
                    break;
                }
                s if s.starts_with("--") => s[2..].to_string(),
                _ => {
                    words.push(a);
                    continue;
                }
            };
            let (name, inline) = match name.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (name, None),
            };
            if VALUED.contains(&name.as_str()) {
                let value = match inline {
                    Some(v) => v,
                    None => raw
                        .next()
                        .ok_or_else(|| Failure::Usage(format!("--{name} needs a value")))?,
                };
                opts.insert(name, value);
            } else if SWITCHES.contains(&name.as_str()) {
                opts.insert(name, "true".into());
            } else {
                return Err(Failure::Usage(format!(
                    "unknown option --{name} (see floe --help)"
                )));
            }
        }
        Ok(Args { words, opts })
    }

    fn opt(&self, name: &str) -> Option<&str> {
        self.opts.get(name).map(String::as_str)
    }

    fn on(&self, name: &str) -> bool {
        self.opts.contains_key(name)
    }

    /// Positional word `i`, named `what` in the error when it is missing.
    fn word(&self, i: usize, what: &str) -> Result<&str, Failure> {
        self.words
            .get(i)
            .map(String::as_str)
            .ok_or_else(|| Failure::Usage(format!("missing {what} (see floe --help)")))
    }

    /// The JSON file of `-f`.
    fn file(&self) -> Result<Value, Failure> {
        let path = self
            .opt("file")
            .ok_or_else(|| Failure::Usage("missing -f FILE (a JSON body)".into()))?;
        let text = if path == "-" {
            std::io::read_to_string(std::io::stdin())
                .map_err(|e| Failure::Usage(format!("cannot read stdin: {e}")))?
        } else {
            std::fs::read_to_string(path)
                .map_err(|e| Failure::Usage(format!("cannot read {path}: {e}")))?
        };
        serde_json::from_str(&text).map_err(|e| Failure::Usage(format!("{path} is not JSON: {e}")))
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Output {
    Text,
    Json,
}

/// What a command hands back: a body to print, and the plan (or the
/// drill) to follow when `--track` asks for it.
struct Done {
    body: Value,
    kind: Kind,
    track: Option<(String, String, String)>,
    drill: Option<track::DrillRef>,
}

/// How a body is printed as text.
#[derive(Clone, Copy)]
enum Kind {
    Deployment,
    Deployments,
    Validation,
    Snapshots,
    Drills,
    Repositories,
    Policies,
    Plans,
    Plan,
    Object,
    NewKey,
    Keys,
    Nothing,
}

fn done(body: Value, kind: Kind) -> Done {
    Done {
        body,
        kind,
        track: None,
        drill: None,
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("{f}");
            ExitCode::from(f.exit_code())
        }
    }
}

async fn run() -> Result<(), Failure> {
    let args = Args::parse(std::env::args().skip(1))?;
    if args.on("help") || args.words.is_empty() {
        print!("{USAGE}");
        return Ok(());
    }
    let output = match args.opt("output").unwrap_or("text") {
        "text" => Output::Text,
        "json" => Output::Json,
        other => {
            return Err(Failure::Usage(format!(
                "--output is json or text, not {other}"
            )));
        }
    };
    let settings = Settings::resolve(
        args.opt("api-url").map(str::to_string),
        args.opt("token").map(str::to_string),
        args.opt("api-key").map(str::to_string),
        args.opt("config").map(PathBuf::from),
    )?;
    let client = Client::new(settings)?;
    let poll = match args.opt("poll-ms") {
        Some(ms) => Duration::from_millis(
            ms.parse()
                .map_err(|_| Failure::Usage("--poll-ms is a number of milliseconds".into()))?,
        ),
        None => Duration::from_secs(2),
    };

    let resource = args.word(
        0,
        "a resource (deployment, snapshot, drill, repository, policy, plan, license, auth)",
    )?;
    let action = args.word(1, "an action")?;
    let result = match resource {
        "deployment" | "deployments" => deployment(&client, &args, action).await?,
        "snapshot" | "snapshots" => snapshot(&client, &args, action).await?,
        "drill" | "drills" => drill(&client, &args, action).await?,
        "repository" | "repositories" => repository(&client, &args, action).await?,
        "policy" | "policies" => policy(&client, &args, action).await?,
        "plan" | "plans" => plan(&client, &args, action).await?,
        "license" => license(&client, &args, action).await?,
        "auth" => auth(&client, &args, action).await?,
        other => return Err(Failure::Usage(format!("unknown resource {other}"))),
    };
    print(output, result.kind, &result.body);
    if args.on("track")
        && let Some(drill) = &result.drill
    {
        let ended = track::follow_drill(&client, drill, poll).await?;
        if output == Output::Json {
            println!("{}", pretty(&ended));
        }
        return Ok(());
    }
    if args.on("track") {
        let Some((id, plan_id, kind)) = result.track else {
            return Err(Failure::Usage(
                "--track: this command started no plan to follow".into(),
            ));
        };
        let plan = track::follow(&client, &id, &plan_id, &kind, poll).await?;
        if output == Output::Json {
            println!("{}", pretty(&plan));
        }
    }
    Ok(())
}

const DEPLOYMENTS: &str = "/api/v1/deployments";
const REPOSITORIES: &str = "/api/v1/platform/configuration/snapshots/repositories";
const POLICIES: &str = "/api/v1/snapshot-policies";
const KEYS: &str = "/api/v1/users/auth/keys";
const LICENSE: &str = "/api/v1/platform/license";

/// The plan a deployment's answer says is pending, to follow.
/// The deployment, its pending plan and that plan's kind, to follow.
fn pending(d: &Value) -> Option<(String, String, String)> {
    let id = d["id"].as_str()?;
    let plan = d["plans"]["pending"]["plan_id"].as_str()?;
    let kind = d["plans"]["pending"]["kind"].as_str().unwrap_or("");
    Some((id.to_string(), plan.to_string(), kind.to_string()))
}

/// `Idempotency-Key`: given, or made here so that the command is safe to
/// retry (a retry with `--idempotency-key` of the key printed on failure).
fn idempotency(args: &Args) -> String {
    match args.opt("idempotency-key") {
        Some(k) => k.to_string(),
        None => format!("floe-cli-{}", uuid::Uuid::new_v4()),
    }
}

/// Says which key a create used when its answer was lost, so that the
/// operator can retry without creating twice.
fn with_key(e: Failure, key: &str) -> Failure {
    match e {
        Failure::Unreachable(m) => Failure::Unreachable(format!(
            "{m}\nretry with --idempotency-key {key}: it creates nothing twice"
        )),
        other => other,
    }
}

/// `If-Match` for `--if-match`: a version as given, or `current`: the
/// version read just now (read-modify-write).
async fn if_match(
    client: &Client,
    args: &Args,
    path: &str,
) -> Result<Vec<(&'static str, String)>, Failure> {
    match args.opt("if-match") {
        None => Ok(Vec::new()),
        Some("current") => {
            let current = client.get(path).await?;
            let v = current["resource_version"]
                .as_u64()
                .ok_or_else(|| Failure::Usage(format!("{path} carries no resource_version")))?;
            Ok(vec![("if-match", format!("\"{v}\""))])
        }
        Some(v) => {
            let v: u64 = v.trim_matches('"').parse().map_err(|_| {
                Failure::Usage("--if-match is a version number or `current`".into())
            })?;
            Ok(vec![("if-match", format!("\"{v}\""))])
        }
    }
}

async fn deployment(client: &Client, args: &Args, action: &str) -> Result<Done, Failure> {
    let validate = if args.on("validate-only") {
        "?validate_only=true"
    } else {
        ""
    };
    match action {
        "create" => {
            let spec = args.file()?;
            let key = idempotency(args);
            let answer = client
                .call(
                    Method::POST,
                    &format!("{DEPLOYMENTS}{validate}"),
                    Some(&spec),
                    &[("idempotency-key", key.clone())],
                )
                .await
                .map_err(|e| with_key(e, &key))?;
            Ok(deployment_answer(answer.body, !validate.is_empty()))
        }
        "list" => {
            let mut query = Vec::new();
            if let Some(n) = args.opt("name") {
                query.push(format!("name={}", encode(n)));
            }
            if let Some(s) = args.opt("status") {
                query.push(format!("status={}", encode(s)));
            }
            let path = if query.is_empty() {
                DEPLOYMENTS.to_string()
            } else {
                format!("{DEPLOYMENTS}?{}", query.join("&"))
            };
            Ok(done(
                client.list_all(&path, "deployments").await?,
                Kind::Deployments,
            ))
        }
        "show" => {
            let id = args.word(2, "a deployment id")?;
            let d = client.get(&format!("{DEPLOYMENTS}/{}", encode(id))).await?;
            Ok(done(d, Kind::Deployment))
        }
        "update" => {
            let id = args.word(2, "a deployment id")?;
            let path = format!("{DEPLOYMENTS}/{}", encode(id));
            let spec = args.file()?;
            let headers = if_match(client, args, &path).await?;
            let answer = client
                .call(
                    Method::PUT,
                    &format!("{path}{validate}"),
                    Some(&spec),
                    &headers,
                )
                .await?;
            Ok(deployment_answer(answer.body, !validate.is_empty()))
        }
        "shutdown" => {
            let id = args.word(2, "a deployment id")?;
            let skip = if args.on("skip-snapshot") {
                "?skip_snapshot=true"
            } else {
                ""
            };
            let answer = client
                .call(
                    Method::POST,
                    &format!("{DEPLOYMENTS}/{}/_shutdown{skip}", encode(id)),
                    None,
                    &[],
                )
                .await?;
            Ok(deployment_answer(answer.body, false))
        }
        "delete" => {
            let id = args.word(2, "a deployment id")?;
            let path = format!("{DEPLOYMENTS}/{}", encode(id));
            let headers = if_match(client, args, &path).await?;
            // A delete is a plan: the record goes when it succeeds.
            let answer = client.call(Method::DELETE, &path, None, &headers).await?;
            Ok(deployment_answer(answer.body, false))
        }
        "clone" => {
            let source = args.word(2, "the source deployment's id")?;
            let name = args
                .opt("name")
                .ok_or_else(|| Failure::Usage("clone needs --name NAME".into()))?;
            let mut body = json!({
                "name": name,
                "snapshot_name": args.opt("snapshot").unwrap_or("__latest_success__"),
            });
            // As given: the API names what it refuses.
            if let Some(mode) = args.opt("mode") {
                body["mode"] = json!(mode);
            }
            if let Some(license) = args.opt("license") {
                body["license"] = json!(license);
            }
            if let Some(t) = args.opt("instance-type") {
                // The source's node groups, on another instance type.
                let src = client
                    .get(&format!("{DEPLOYMENTS}/{}", encode(source)))
                    .await?;
                let groups: Vec<Value> = src["node_groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|g| {
                        let mut g = g.clone();
                        if let Some(o) = g.as_object_mut() {
                            // Read-only figures of the view, not of a spec.
                            for k in ["arch", "vcpus", "memory_mib", "jvm_heap_mib"] {
                                o.remove(k);
                            }
                            o.insert("instance_type".into(), json!(t));
                        }
                        g
                    })
                    .collect();
                body["node_groups"] = json!(groups);
            }
            let key = idempotency(args);
            let answer = client
                .call(
                    Method::POST,
                    &format!("{DEPLOYMENTS}/{}/_clone", encode(source)),
                    Some(&body),
                    &[("idempotency-key", key.clone())],
                )
                .await
                .map_err(|e| with_key(e, &key))?;
            Ok(deployment_answer(answer.body, false))
        }
        other => Err(Failure::Usage(format!("unknown deployment action {other}"))),
    }
}

fn deployment_answer(body: Value, validation: bool) -> Done {
    if validation {
        return done(body, Kind::Validation);
    }
    let track = pending(&body);
    Done {
        body,
        kind: Kind::Deployment,
        track,
        drill: None,
    }
}

/// Restore drills: `drill run` starts one (`--track` follows it to its
/// verdict), `drill list` lists a deployment's, newest first.
async fn drill(client: &Client, args: &Args, action: &str) -> Result<Done, Failure> {
    let id = args.word(2, "a deployment id")?;
    match action {
        "run" => {
            let mut body = if args.opt("file").is_some() {
                args.file()?
            } else {
                json!({})
            };
            // As given: the API names what it refuses.
            for (opt, field) in [
                ("mode", "mode"),
                ("instance-type", "instance_type"),
                ("license", "license"),
            ] {
                if let Some(v) = args.opt(opt) {
                    body[field] = json!(v);
                }
            }
            let answer = client
                .call(
                    Method::POST,
                    &format!("{DEPLOYMENTS}/{}/_drill", encode(id)),
                    Some(&body),
                    &[],
                )
                .await?;
            let drill = track::DrillRef::of(&answer.body);
            Ok(Done {
                body: answer.body,
                kind: Kind::Object,
                track: None,
                drill,
            })
        }
        "list" => Ok(done(
            client
                .list_all(&format!("{DEPLOYMENTS}/{}/drills", encode(id)), "drills")
                .await?,
            Kind::Drills,
        )),
        other => Err(Failure::Usage(format!("unknown drill action {other}"))),
    }
}

async fn snapshot(client: &Client, args: &Args, action: &str) -> Result<Done, Failure> {
    let id = args.word(2, "a deployment id")?;
    let base = format!("{DEPLOYMENTS}/{}/snapshots", encode(id));
    match action {
        "take" => {
            let mut body = json!({});
            if let Some(n) = args.opt("name") {
                body["name"] = json!(n);
            }
            let wait = if args.on("wait") {
                "?wait_for_completion=true"
            } else {
                ""
            };
            let answer = client
                .call(Method::POST, &format!("{base}{wait}"), Some(&body), &[])
                .await?;
            Ok(done(answer.body, Kind::Object))
        }
        "list" => Ok(done(
            client.list_all(&base, "snapshots").await?,
            Kind::Snapshots,
        )),
        "delete" => {
            let name = args.word(3, "a snapshot name")?;
            client
                .call(
                    Method::DELETE,
                    &format!("{base}/{}", encode(name)),
                    None,
                    &[],
                )
                .await?;
            Ok(done(json!({"deleted": name}), Kind::Nothing))
        }
        other => Err(Failure::Usage(format!("unknown snapshot action {other}"))),
    }
}

async fn repository(client: &Client, args: &Args, action: &str) -> Result<Done, Failure> {
    if action == "list" {
        return Ok(done(
            client.list_all(REPOSITORIES, "repositories").await?,
            Kind::Repositories,
        ));
    }
    let name = args.word(2, "a repository name")?;
    let path = format!("{REPOSITORIES}/{}", encode(name));
    match action {
        "put" => {
            let body = args.file()?;
            let headers = if_match(client, args, &path).await?;
            let answer = client
                .call(Method::PUT, &path, Some(&body), &headers)
                .await?;
            Ok(done(answer.body, Kind::Object))
        }
        "show" => Ok(done(client.get(&path).await?, Kind::Object)),
        "delete" => {
            let headers = if_match(client, args, &path).await?;
            client.call(Method::DELETE, &path, None, &headers).await?;
            Ok(done(json!({"deleted": name}), Kind::Nothing))
        }
        other => Err(Failure::Usage(format!("unknown repository action {other}"))),
    }
}

/// API keys: `auth key create|list|delete`. A new key is printed once.
async fn auth(client: &Client, args: &Args, action: &str) -> Result<Done, Failure> {
    if action != "key" && action != "keys" {
        return Err(Failure::Usage(format!(
            "unknown auth action {action} (auth key ...)"
        )));
    }
    match args.word(2, "a key action (create, list, delete)")? {
        "create" => {
            let description = args
                .opt("description")
                .ok_or_else(|| Failure::Usage("missing --description TEXT".into()))?;
            let mut body = json!({ "description": description });
            if let Some(e) = args.opt("expiration") {
                body["expiration"] = json!(e);
            }
            if let Some(r) = args.opt("roles") {
                let roles: Vec<&str> = r.split(',').map(str::trim).collect();
                body["roles"] = json!(roles);
            }
            let answer = client.call(Method::POST, KEYS, Some(&body), &[]).await?;
            Ok(done(answer.body, Kind::NewKey))
        }
        "list" => {
            let path = if args.on("all") {
                format!("{KEYS}/_all")
            } else {
                KEYS.to_string()
            };
            Ok(done(client.get(&path).await?, Kind::Keys))
        }
        "delete" => {
            let id = args.word(3, "a key id")?;
            let path = match args.opt("user") {
                Some(user) => format!("/api/v1/users/{}/auth/keys/{}", encode(user), encode(id)),
                None => format!("{KEYS}/{}", encode(id)),
            };
            client.call(Method::DELETE, &path, None, &[]).await?;
            Ok(done(json!({"deleted": id}), Kind::Nothing))
        }
        other => Err(Failure::Usage(format!("unknown key action {other}"))),
    }
}

/// The organization's platform license: the file Elastic sent, uploaded
/// as it is; shown without its signature.
async fn license(client: &Client, args: &Args, action: &str) -> Result<Done, Failure> {
    match action {
        "put" => {
            let body = args.file()?;
            let answer = client.call(Method::PUT, LICENSE, Some(&body), &[]).await?;
            Ok(done(answer.body, Kind::Object))
        }
        "show" => Ok(done(client.get(LICENSE).await?, Kind::Object)),
        "delete" => {
            client.call(Method::DELETE, LICENSE, None, &[]).await?;
            Ok(done(json!({"deleted": "license"}), Kind::Nothing))
        }
        other => Err(Failure::Usage(format!("unknown license action {other}"))),
    }
}

async fn policy(client: &Client, args: &Args, action: &str) -> Result<Done, Failure> {
    match action {
        "create" => {
            let body = args.file()?;
            let answer = client
                .call(Method::POST, POLICIES, Some(&body), &[])
                .await?;
            return Ok(done(answer.body, Kind::Object));
        }
        "list" => {
            return Ok(done(
                client.list_all(POLICIES, "policies").await?,
                Kind::Policies,
            ));
        }
        _ => {}
    }
    let id = args.word(2, "a policy id")?;
    let path = format!("{POLICIES}/{}", encode(id));
    match action {
        "show" => Ok(done(client.get(&path).await?, Kind::Object)),
        "update" => {
            let body = args.file()?;
            let headers = if_match(client, args, &path).await?;
            let answer = client
                .call(Method::PUT, &path, Some(&body), &headers)
                .await?;
            Ok(done(answer.body, Kind::Object))
        }
        "delete" => {
            let headers = if_match(client, args, &path).await?;
            client.call(Method::DELETE, &path, None, &headers).await?;
            Ok(done(json!({"deleted": id}), Kind::Nothing))
        }
        other => Err(Failure::Usage(format!("unknown policy action {other}"))),
    }
}

async fn plan(client: &Client, args: &Args, action: &str) -> Result<Done, Failure> {
    let id = args.word(2, "a deployment id")?;
    let base = format!("{DEPLOYMENTS}/{}/plans", encode(id));
    match action {
        "show" => Ok(done(client.get(&base).await?, Kind::Plans)),
        "cancel" => {
            // --force ends it at once where it stands (the API's force_delete).
            let force = if args.on("force") {
                "?force_delete=true"
            } else {
                ""
            };
            let answer = client
                .call(Method::DELETE, &format!("{base}/pending{force}"), None, &[])
                .await?;
            let kind = answer.body["kind"].as_str().unwrap_or("").to_string();
            let track = answer.body["plan_attempt_id"]
                .as_str()
                .map(|p| (id.to_string(), p.to_string(), kind));
            Ok(Done {
                body: answer.body,
                kind: Kind::Plan,
                track,
                drill: None,
            })
        }
        other => Err(Failure::Usage(format!("unknown plan action {other}"))),
    }
}

// ---- printing ----

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Rows as aligned columns under a heading.
fn table(head: &[&str], rows: Vec<Vec<String>>) {
    let mut widths: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    let line = |cells: Vec<String>| {
        let joined: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        println!("{}", joined.join("  ").trim_end());
    };
    line(head.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(r);
    }
}

fn items<'a>(body: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    body[field].as_array().into_iter().flatten()
}

/// Top-level fields as `key: value` lines.
fn object(v: &Value) {
    if let Some(o) = v.as_object() {
        for (k, val) in o {
            println!("{k}: {}", s(val));
        }
    }
}

fn print_deployment(d: &Value) {
    println!("id:       {}", s(&d["id"]));
    println!("name:     {}", s(&d["name"]));
    println!("status:   {}", s(&d["status"]));
    println!("version:  {}", s(&d["version"]));
    for g in items(d, "node_groups") {
        println!(
            "group:    {} {} x{} ({} zones, {} GB) {}",
            s(&g["id"]),
            s(&g["instance_type"]),
            s(&g["count"]),
            s(&g["zone_count"]),
            s(&g["storage"]["size_gb"]),
            s(&g["arch"]),
        );
    }
    if let Some(r) = d["snapshot"]["repository"].as_str() {
        println!("repository: {r}");
    }
    if let Some(p) = d["plans"]["pending"].as_object() {
        println!("pending plan: {} ({})", s(&p["plan_id"]), s(&p["kind"]));
    }
    if let Some(e) = d["elasticsearch"]["endpoint"].as_str() {
        println!("endpoint: {e}");
    }
    for w in items(d, "warnings") {
        println!("warning:  {}", s(w));
    }
    if let Some(c) = d["credentials"].as_object() {
        // Only a create's (or a reset's) answer carries it: say so.
        println!(
            "credentials (shown once): {} / {}",
            s(&c["username"]),
            s(&c["password"])
        );
    }
    println!("resource_version: {}", s(&d["resource_version"]));
}

fn print(output: Output, kind: Kind, body: &Value) {
    if output == Output::Json {
        if !matches!(kind, Kind::Nothing) {
            println!("{}", pretty(body));
        }
        return;
    }
    match kind {
        Kind::Deployment => print_deployment(body),
        Kind::Deployments => table(
            &["ID", "NAME", "STATUS", "VERSION", "PLAN"],
            items(body, "deployments")
                .map(|d| {
                    vec![
                        s(&d["id"]),
                        s(&d["name"]),
                        s(&d["status"]),
                        s(&d["version"]),
                        s(&d["plans"]["pending"]["kind"]),
                    ]
                })
                .collect(),
        ),
        Kind::Validation => {
            println!("validate only: nothing was changed");
            println!("outcome: {}", s(&body["outcome"]));
            print_deployment(&body["deployment"]);
            if body["plan"].is_object() {
                println!("plan ({}):", s(&body["plan"]["kind"]));
                for step in items(&body["plan"], "steps") {
                    println!("  {}", s(step));
                }
            }
        }
        Kind::Snapshots => table(
            &["SNAPSHOT", "STATE", "START", "END", "REPOSITORY"],
            items(body, "snapshots")
                .map(|x| {
                    vec![
                        s(&x["snapshot"]),
                        s(&x["state"]),
                        s(&x["start_time"]),
                        s(&x["end_time"]),
                        s(&x["repository"]),
                    ]
                })
                .collect(),
        ),
        Kind::Drills => table(
            &[
                "ID", "STATUS", "SNAPSHOT", "STARTED", "RPO_S", "RTO_MS", "FAILURE",
            ],
            items(body, "drills")
                .map(|d| {
                    vec![
                        s(&d["id"]),
                        s(&d["status"]),
                        s(&d["snapshot"]),
                        s(&d["started"]),
                        s(&d["recovery_point_seconds"]),
                        s(&d["recovery_time"]["total_millis"]),
                        s(&d["failure"]["reason"]),
                    ]
                })
                .collect(),
        ),
        Kind::Repositories => table(
            &["NAME", "TYPE", "USED_BY"],
            items(body, "repositories")
                .map(|r| vec![s(&r["name"]), s(&r["type"]), s(&r["used_by"])])
                .collect(),
        ),
        Kind::Policies => table(
            &["ID", "NAME", "SCHEDULE", "REPOSITORY", "ENABLED"],
            items(body, "policies")
                .map(|p| {
                    vec![
                        s(&p["id"]),
                        s(&p["name"]),
                        s(&p["schedule_expression"]["expression"]),
                        s(&p["repository"]),
                        s(&p["enabled"]),
                    ]
                })
                .collect(),
        ),
        Kind::Plans => {
            for which in ["pending", "current"] {
                if body[which].is_object() {
                    println!("{which}:");
                    for l in track::render(&body[which], false) {
                        println!("  {l}");
                    }
                }
            }
            let history = items(body, "history").count();
            println!("history: {history} finished plan(s)");
        }
        Kind::Plan => {
            for l in track::render(body, false) {
                println!("{l}");
            }
        }
        Kind::Object => object(body),
        Kind::NewKey => {
            object(body);
            println!("keep the key now: it is not shown again");
        }
        Kind::Keys => table(
            &["ID", "USER", "ROLES", "EXPIRES", "LAST USED", "DESCRIPTION"],
            items(body, "keys")
                .map(|k| {
                    let roles: Vec<String> = items(k, "roles").map(s).collect();
                    vec![
                        s(&k["id"]),
                        s(&k["user_id"]),
                        roles.join(","),
                        s(&k["expiration_date"]),
                        s(&k["last_used_date"]),
                        s(&k["description"]),
                    ]
                })
                .collect(),
        ),
        Kind::Nothing => {
            if let Some(d) = body["deleted"].as_str() {
                println!("deleted {d}");
            }
        }
    }
}
