//! Every way a client can get a request wrong, as one table against the real
//! binary. Each row says what is sent and exactly what must come back: the
//! status, the ECE error code and the offending fields. Each row also checks
//! that nothing changed, that the answer has ECE's shape with the code in
//! `x-cloud-error-codes`, and that it is never a 500.
//!
//! The rows print as they run, so the test's output documents the API's
//! error behaviour.

use floe_tests::{
    Call, DEPLOYMENTS, INSTANCE_TYPES, POLICIES, REPOSITORIES, Reply, Server, TestResult,
    deployment, ece_error, error_fields, policy, s3_repository,
};
use serde_json::{Value, json};

const ORG: &str = "acme";
const OTHER_ORG: &str = "globex";
const REPO: &str = "main-backups";
const OTHER_REPO: &str = "globex-repo";
/// A well-formed policy id that no organization has.
const MISSING_POLICY_ID: &str = "0193a0c4e1f07d2a8b9c0d1e2f3a4b5c";
const IDEMPOTENCY_KEY: &str = "bb-idem-1";

#[derive(Debug, Clone, Copy)]
enum Auth {
    /// platform_admin of acme.
    Admin,
    /// deployment_manager of acme.
    Manager,
    /// deployment_viewer of acme.
    Viewer,
    /// No Authorization header at all.
    Missing,
    /// `Authorization: Basic …`.
    Basic,
    /// `Bearer` followed by something that is not a JWT.
    Garbage,
    Expired,
    WrongAudience,
    AlgNone,
    ForeignSecret,
    /// Signed right, but none of the roles is one of Floe's.
    NoRole,
    /// Signed right, without an `org` claim.
    NoOrg,
    WrongIssuer,
    /// `nbf` an hour from now.
    NotYetValid,
    /// HS512 with the server's own secret: only HS256 is accepted.
    Hs512,
}

#[derive(Debug, Clone)]
enum Body {
    None,
    Json(Value),
    /// Sent as is, with this content type (none when `None`).
    Text(String, Option<&'static str>),
}

/// One bad request and the one answer it must get.
#[derive(Debug, Clone)]
struct Row {
    what: &'static str,
    method: &'static str,
    /// May name `{dep}`, `{pol}`, `{other_dep}` and `{other_pol}`.
    path: String,
    auth: Auth,
    headers: Vec<(&'static str, String)>,
    body: Body,
    raw: bool,
    status: u16,
    code: &'static str,
    fields: Vec<String>,
}

fn row(what: &'static str, method: &'static str, path: impl Into<String>) -> Row {
    Row {
        what,
        method,
        path: path.into(),
        auth: Auth::Admin,
        headers: Vec::new(),
        body: Body::None,
        raw: false,
        status: 0,
        code: "",
        fields: Vec::new(),
    }
}

impl Row {
    fn auth(mut self, auth: Auth) -> Row {
        self.auth = auth;
        self
    }
    fn header(mut self, name: &'static str, value: impl Into<String>) -> Row {
        self.headers.push((name, value.into()));
        self
    }
    fn json(mut self, body: Value) -> Row {
        self.body = Body::Json(body);
        self
    }
    fn text(mut self, body: impl Into<String>, content_type: Option<&'static str>) -> Row {
        self.body = Body::Text(body.into(), content_type);
        self
    }
    fn raw(mut self) -> Row {
        self.raw = true;
        self
    }
    fn expect(mut self, status: u16, code: &'static str) -> Row {
        self.status = status;
        self.code = code;
        self
    }
    fn fields(mut self, fields: &[&str]) -> Row {
        self.fields = fields.iter().map(|f| f.to_string()).collect();
        self
    }
}

/// A valid deployment body, altered by `change`.
fn dep_with(change: impl FnOnce(&mut Value)) -> Value {
    let mut d = deployment("bad-request", None, &[]);
    change(&mut d);
    d
}

/// A valid policy body on the seeded repository, altered by `change`.
fn pol_with(change: impl FnOnce(&mut Value)) -> Value {
    let mut p = policy("bad-policy", REPO);
    change(&mut p);
    p
}

fn repo_with(change: impl FnOnce(&mut Value)) -> Value {
    let mut r = s3_repository("acme-snapshots");
    change(&mut r);
    r
}

/// A JSON document just over the 1 MiB cap.
fn oversize() -> String {
    format!("{{\"name\":\"{}\"}}", "a".repeat(1024 * 1024 + 16))
}

fn table() -> Vec<Row> {
    let repo = |name: &str| format!("{REPOSITORIES}/{name}");
    let long_name = "a".repeat(300);
    let json_ct = Some("application/json");
    vec![
        // ---- snapshot repositories ----
        row("malformed JSON", "PUT", repo("new-repo"))
            .text(r#"{"type":"s3","#, json_ct)
            .expect(400, "request.malformed_json"),
        row("empty body", "PUT", repo("new-repo"))
            .text("", json_ct)
            .expect(400, "request.body_required"),
        row("wrong type: bucket is a number", "PUT", repo("new-repo"))
            .text(r#"{"type":"s3","settings":{"bucket":5}}"#, json_ct)
            .expect(400, "validation.type")
            .fields(&["settings.bucket"]),
        row(
            "wrong type, `settings` sent before `type` (key order must not matter)",
            "PUT",
            repo("new-repo"),
        )
        .text(r#"{"settings":{"bucket":5},"type":"s3"}"#, json_ct)
        .expect(400, "validation.type")
        .fields(&["settings.bucket"]),
        row("unknown top-level field", "PUT", repo("new-repo"))
            .text(
                r#"{"type":"s3","settings":{"bucket":"abc-snapshots"},"extra":1}"#,
                json_ct,
            )
            .expect(400, "validation.unknown_field")
            .fields(&["extra"]),
        row("unknown nested field", "PUT", repo("new-repo"))
            .text(
                r#"{"type":"s3","settings":{"bucket":"abc-snapshots","bukket":"x"}}"#,
                json_ct,
            )
            .expect(400, "validation.unknown_field")
            .fields(&["settings.bukket"]),
        row(
            "unknown nested field, `settings` sent before `type`",
            "PUT",
            repo("new-repo"),
        )
        .text(
            r#"{"settings":{"bucket":"abc-snapshots","bukket":"x"},"type":"s3"}"#,
            json_ct,
        )
        .expect(400, "validation.unknown_field")
        .fields(&["settings.bukket"]),
        row("unknown repository type", "PUT", repo("new-repo"))
            .json(json!({"type": "gcs", "settings": {"bucket": "abc"}}))
            .expect(400, "validation.unknown_value")
            .fields(&["type"]),
        row("bad byte size", "PUT", repo("new-repo"))
            .json(repo_with(|r| {
                r["settings"]["max_snapshot_bytes_per_sec"] = json!("fast")
            }))
            .expect(400, "validation.byte_size")
            .fields(&["settings.max_snapshot_bytes_per_sec"]),
        row("endpoint with a scheme", "PUT", repo("new-repo"))
            .json(repo_with(|r| {
                r["settings"]["endpoint"] = json!("http://1.2.3.4")
            }))
            .expect(400, "validation.endpoint")
            .fields(&["settings.endpoint"]),
        row(
            "endpoint at the instance metadata service",
            "PUT",
            repo("new-repo"),
        )
        .json(repo_with(|r| {
            r["settings"]["endpoint"] = json!("169.254.169.254")
        }))
        .expect(400, "validation.endpoint")
        .fields(&["settings.endpoint"]),
        row(
            "endpoint 0xa9fea9fe: 169.254.169.254 written in hex, which getaddrinfo resolves",
            "PUT",
            repo("ssrf-hex"),
        )
        .json(repo_with(|r| r["settings"]["endpoint"] = json!("0xa9fea9fe")))
        .expect(400, "validation.endpoint")
        .fields(&["settings.endpoint"]),
        row(
            "endpoint 0xa9.0xfe.0xa9.0xfe: 169.254.169.254 in dotted hex",
            "PUT",
            repo("ssrf-dotted-hex"),
        )
        .json(repo_with(|r| {
            r["settings"]["endpoint"] = json!("0xa9.0xfe.0xa9.0xfe")
        }))
        .expect(400, "validation.endpoint")
        .fields(&["settings.endpoint"]),
        row(
            "endpoint 0x7f.1: loopback in short hex form",
            "PUT",
            repo("ssrf-loopback"),
        )
        .json(repo_with(|r| r["settings"]["endpoint"] = json!("0x7f.1:9000")))
        .expect(400, "validation.endpoint")
        .fields(&["settings.endpoint"]),
        row(
            "private endpoint while private endpoints are not allowed",
            "PUT",
            repo("new-repo"),
        )
        .json(repo_with(|r| {
            r["settings"]["endpoint"] = json!("10.0.0.5:9000")
        }))
        .expect(400, "validation.endpoint")
        .fields(&["settings.endpoint"]),
        row("secret_key without access_key", "PUT", repo("new-repo"))
            .json(repo_with(|r| r["settings"]["secret_key"] = json!("s3cr3t")))
            .expect(400, "validation.required")
            .fields(&["settings.access_key"]),
        row(
            "five bad fields: every one is listed",
            "PUT",
            repo("new-repo"),
        )
        .json(json!({"type": "s3", "settings": {
                "bucket": "A", "chunk_size": "0", "endpoint": "http://x",
                "max_snapshot_bytes_per_sec": "fast", "secret_key": "s3cr3t"}}))
        .expect(400, "validation.bucket")
        .fields(&[
            "settings.access_key",
            "settings.bucket",
            "settings.chunk_size",
            "settings.endpoint",
            "settings.max_snapshot_bytes_per_sec",
        ]),
        row("name with '/' (URL-encoded)", "PUT", repo("a%2Fb"))
            .json(s3_repository("acme-snapshots"))
            .expect(400, "validation.name")
            .fields(&["name"]),
        row("name with a space (URL-encoded)", "PUT", repo("new%20repo"))
            .json(s3_repository("acme-snapshots"))
            .expect(400, "validation.name")
            .fields(&["name"]),
        row("name '..' (sent verbatim)", "PUT", repo(".."))
            .raw()
            .json(s3_repository("acme-snapshots"))
            .expect(400, "validation.name")
            .fields(&["name"]),
        row("name of 300 characters", "PUT", repo(&long_name))
            .json(s3_repository("acme-snapshots"))
            .expect(400, "validation.name")
            .fields(&["name"]),
        row("no content type", "PUT", repo("new-repo"))
            .text(s3_repository("acme-snapshots").to_string(), None)
            .expect(415, "request.unsupported_media_type"),
        row("text/plain content type", "PUT", repo("new-repo"))
            .text(
                s3_repository("acme-snapshots").to_string(),
                Some("text/plain"),
            )
            .expect(415, "request.unsupported_media_type"),
        row("body over 1 MiB", "PUT", repo("new-repo"))
            .text(oversize(), json_ct)
            .expect(413, "request.body_too_large"),
        row("missing token", "PUT", repo("new-repo"))
            .auth(Auth::Missing)
            .json(s3_repository("acme-snapshots"))
            .expect(401, "auth.missing_token"),
        row(
            "deployment_manager creating a repository",
            "PUT",
            repo("new-repo"),
        )
        .auth(Auth::Manager)
        .json(s3_repository("acme-snapshots"))
        .expect(403, "auth.forbidden"),
        row("unsigned token, alg none", "PUT", repo("new-repo"))
            .auth(Auth::AlgNone)
            .json(s3_repository("acme-snapshots"))
            .expect(401, "auth.unsupported_algorithm"),
        row(
            "deployment_manager deleting a repository",
            "DELETE",
            repo(REPO),
        )
        .auth(Auth::Manager)
        .expect(403, "auth.forbidden"),
        row("list: expired token", "GET", REPOSITORIES)
            .auth(Auth::Expired)
            .expect(401, "auth.token_expired"),
        row("stale If-Match", "PUT", repo(REPO))
            .header("if-match", "\"9\"")
            .json(s3_repository("acme-snapshots"))
            .expect(412, "request.version_mismatch"),
        row(
            "If-Match on a repository that does not exist",
            "PUT",
            repo("never-created"),
        )
        .header("if-match", "\"1\"")
        .json(s3_repository("acme-snapshots"))
        .expect(404, "repositories.repository_not_found"),
        row(
            "stale ?version= on delete",
            "DELETE",
            repo(&format!("{REPO}?version=9")),
        )
        .expect(412, "request.version_mismatch"),
        row(
            "deleting a repository a deployment and a policy use",
            "DELETE",
            repo(REPO),
        )
        .expect(409, "repositories.repository_in_use"),
        row("another organization's repository", "GET", repo(OTHER_REPO))
            .expect(404, "repositories.repository_not_found"),
        row(
            "deleting another organization's repository",
            "DELETE",
            repo(OTHER_REPO),
        )
        .expect(404, "repositories.repository_not_found"),
        row(
            "list: bad cursor",
            "GET",
            format!("{REPOSITORIES}?cursor=!!!"),
        )
        .auth(Auth::Viewer)
        .expect(400, "validation.cursor")
        .fields(&["cursor"]),
        row(
            "list: unknown query parameter",
            "GET",
            format!("{REPOSITORIES}?sise=5"),
        )
        .auth(Auth::Viewer)
        .expect(400, "validation.unknown_parameter")
        .fields(&["sise"]),
        row(
            "list: size above 100",
            "GET",
            format!("{REPOSITORIES}?size=101"),
        )
        .auth(Auth::Viewer)
        .expect(400, "validation.range")
        .fields(&["size"]),
        // ---- deployments ----
        row("malformed JSON", "POST", DEPLOYMENTS)
            .text(r#"{"name": "x","#, json_ct)
            .expect(400, "request.malformed_json"),
        row("trailing garbage after the JSON", "POST", DEPLOYMENTS)
            .text(format!("{} x", dep_with(|_| {})), json_ct)
            .expect(400, "request.malformed_json"),
        row(
            "a JSON array instead of an object (serde's positional form)",
            "POST",
            DEPLOYMENTS,
        )
        .text(
            r#"["array-body","8.15.3",[["hot",["master","data_hot"],"m6g.xlarge",3,3,[200,"gp3",null,null]]],{},null,{"tags":[]}]"#,
            json_ct,
        )
        .expect(400, "validation.type")
        .fields(&["body"]),
        row(
            "a nested object sent as an array",
            "POST",
            DEPLOYMENTS,
        )
        .json(dep_with(|d| {
            d["node_groups"][0]["storage"] = json!([200, "gp3", null, null])
        }))
        .expect(400, "validation.type")
        .fields(&["node_groups[0].storage"]),
        row("wrong type: count is a string", "POST", DEPLOYMENTS)
            .json(dep_with(|d| d["node_groups"][0]["count"] = json!("three")))
            .expect(400, "validation.type")
            .fields(&["node_groups[0].count"]),
        row("unknown top-level field", "POST", DEPLOYMENTS)
            .json(dep_with(|d| d["replicas"] = json!(2)))
            .expect(400, "validation.unknown_field")
            .fields(&["replicas"]),
        row("unknown nested field", "POST", DEPLOYMENTS)
            .json(dep_with(|d| {
                d["node_groups"][0]["storage"]["size_gib"] = json!(3)
            }))
            .expect(400, "validation.unknown_field")
            .fields(&["node_groups[0].storage.size_gib"]),
        row("unknown instance type", "POST", DEPLOYMENTS)
            .json(dep_with(|d| {
                d["node_groups"][0]["instance_type"] = json!("m6g.huge")
            }))
            .expect(400, "validation.instance_type")
            .fields(&["node_groups[0].instance_type"]),
        row("a shared cache on a group that is not frozen", "POST", DEPLOYMENTS)
            .json(dep_with(|d| d["node_groups"][0]["shared_cache"] = json!("90%")))
            .expect(400, "validation.shared_cache")
            .fields(&["node_groups[0].shared_cache"]),
        row("a frozen shared cache of 0 %", "POST", DEPLOYMENTS)
            .json(dep_with(|d| {
                d["node_groups"][0]["roles"] = json!(["master", "data_hot", "data_frozen"]);
                d["node_groups"][0]["shared_cache"] = json!("0%")
            }))
            .expect(400, "validation.shared_cache")
            .fields(&["node_groups[0].shared_cache"]),
        row("a frozen shared cache larger than the disk", "POST", DEPLOYMENTS)
            .json(dep_with(|d| {
                d["node_groups"][0]["roles"] = json!(["master", "data_hot", "data_frozen"]);
                d["node_groups"][0]["shared_cache"] = json!("50tb")
            }))
            .expect(400, "validation.shared_cache")
            .fields(&["node_groups[0].shared_cache"]),
        row("restore_snapshot with an unknown mode", "POST", DEPLOYMENTS)
            .json(dep_with(|d| {
                d["restore_snapshot"] = json!({"source_deployment_id": "0123456789abcdef0123456789abcdef", "mode": "copy"})
            }))
            .expect(400, "validation.unknown_value")
            .fields(&["restore_snapshot.mode"]),
        row("restore_snapshot with a bad source id", "POST", DEPLOYMENTS)
            .json(dep_with(|d| {
                d["restore_snapshot"] = json!({"source_deployment_id": "../x"})
            }))
            .expect(400, "validation.id")
            .fields(&["restore_snapshot.source_deployment_id"]),
        row("count 0", "POST", DEPLOYMENTS)
            .json(dep_with(|d| d["node_groups"][0]["count"] = json!(0)))
            .expect(400, "validation.range")
            .fields(&["node_groups[0].count"]),
        row("count 1000", "POST", DEPLOYMENTS)
            .json(dep_with(|d| d["node_groups"][0]["count"] = json!(1000)))
            .expect(400, "validation.range")
            .fields(&["node_groups[0].count"]),
        row("negative storage", "POST", DEPLOYMENTS)
            .json(dep_with(|d| {
                d["node_groups"][0]["storage"]["size_gb"] = json!(-5)
            }))
            .expect(400, "validation.type")
            .fields(&["node_groups[0].storage.size_gb"]),
        row("bad Elasticsearch version", "POST", DEPLOYMENTS)
            .json(dep_with(|d| d["version"] = json!("8.x")))
            .expect(400, "validation.version")
            .fields(&["version"]),
        row("Elasticsearch version too old", "POST", DEPLOYMENTS)
            .json(dep_with(|d| d["version"] = json!("6.8.23")))
            .expect(400, "validation.version")
            .fields(&["version"]),
        row(
            "platform-owned user setting cluster.name",
            "POST",
            DEPLOYMENTS,
        )
        .json(dep_with(|d| {
            d["user_settings"] = json!({"cluster.name": "mine"})
        }))
        .expect(400, "validation.platform_owned_setting")
        .fields(&["user_settings.cluster.name"]),
        row(
            "platform-owned user setting discovery.seed_hosts, nested",
            "POST",
            DEPLOYMENTS,
        )
        .json(dep_with(|d| {
            d["user_settings"] = json!({"discovery": {"seed_hosts": ["10.0.0.1"]}})
        }))
        .expect(400, "validation.platform_owned_setting")
        .fields(&["user_settings.discovery.seed_hosts"]),
        row(
            "user setting off the allowlist: anonymous superuser (issue 33)",
            "POST",
            DEPLOYMENTS,
        )
        .json(dep_with(|d| {
            d["user_settings"] = json!({"xpack.security.authc.anonymous.roles": "superuser"})
        }))
        .expect(400, "validation.setting_key")
        .fields(&["user_settings.xpack.security.authc.anonymous.roles"]),
        row("name '..'", "POST", DEPLOYMENTS)
            .json(dep_with(|d| d["name"] = json!("..")))
            .expect(400, "validation.name")
            .fields(&["name"]),
        row("name of 300 characters", "POST", DEPLOYMENTS)
            .json(dep_with(|d| d["name"] = json!("a".repeat(300))))
            .expect(400, "validation.name")
            .fields(&["name"]),
        row("four bad fields: every one is listed", "POST", DEPLOYMENTS)
            .json(dep_with(|d| {
                d["name"] = json!("Bad Name");
                d["version"] = json!("8.x");
                d["node_groups"][0]["count"] = json!(0);
                d["user_settings"] = json!({"cluster.name": "mine"});
            }))
            .expect(400, "validation.range")
            .fields(&[
                "name",
                "version",
                "node_groups[0].count",
                "user_settings.cluster.name",
            ]),
        row("repository that does not exist", "POST", DEPLOYMENTS)
            .json(dep_with(|d| {
                d["snapshot"] = json!({"repository": "no-such-repo"})
            }))
            .expect(400, "validation.repository_not_found")
            .fields(&["snapshot.repository"]),
        row("policy that does not exist", "POST", DEPLOYMENTS)
            .json(dep_with(|d| {
                d["snapshot"] = json!({"repository": REPO, "policies": [MISSING_POLICY_ID]})
            }))
            .expect(400, "validation.policy_not_found")
            .fields(&["snapshot.policies[0]"]),
        row(
            "another organization's policy attached",
            "POST",
            DEPLOYMENTS,
        )
        .json(dep_with(|d| {
            d["snapshot"] = json!({"repository": REPO, "policies": ["{other_pol}"]})
        }))
        .expect(400, "validation.policy_not_found")
        .fields(&["snapshot.policies[0]"]),
        row("deployment_viewer creating", "POST", DEPLOYMENTS)
            .auth(Auth::Viewer)
            .json(dep_with(|_| {}))
            .expect(403, "auth.forbidden"),
        row("no content type", "POST", DEPLOYMENTS)
            .text(dep_with(|_| {}).to_string(), None)
            .expect(415, "request.unsupported_media_type"),
        row("body over 1 MiB", "POST", DEPLOYMENTS)
            .text(oversize(), json_ct)
            .expect(413, "request.body_too_large"),
        row("expired token", "POST", DEPLOYMENTS)
            .auth(Auth::Expired)
            .json(dep_with(|_| {}))
            .expect(401, "auth.token_expired"),
        row("token for another audience", "POST", DEPLOYMENTS)
            .auth(Auth::WrongAudience)
            .json(dep_with(|_| {}))
            .expect(401, "auth.wrong_audience"),
        row("unsigned token, alg none", "POST", DEPLOYMENTS)
            .auth(Auth::AlgNone)
            .json(dep_with(|_| {}))
            .expect(401, "auth.unsupported_algorithm"),
        row("token signed with another secret", "POST", DEPLOYMENTS)
            .auth(Auth::ForeignSecret)
            .json(dep_with(|_| {}))
            .expect(401, "auth.bad_signature"),
        row("token granting none of Floe's roles", "GET", DEPLOYMENTS)
            .auth(Auth::NoRole)
            .expect(401, "auth.no_role"),
        row("token without an org claim", "GET", DEPLOYMENTS)
            .auth(Auth::NoOrg)
            .expect(401, "auth.invalid_claims"),
        row("token from another issuer", "POST", DEPLOYMENTS)
            .auth(Auth::WrongIssuer)
            .json(dep_with(|_| {}))
            .expect(401, "auth.wrong_issuer"),
        row("token not valid yet (nbf in an hour)", "GET", DEPLOYMENTS)
            .auth(Auth::NotYetValid)
            .expect(401, "auth.token_not_yet_valid"),
        row("token signed with HS512", "GET", DEPLOYMENTS)
            .auth(Auth::Hs512)
            .expect(401, "auth.unsupported_algorithm"),
        row("bearer value that is not a JWT", "GET", DEPLOYMENTS)
            .auth(Auth::Garbage)
            .expect(401, "auth.invalid_token"),
        row("Basic instead of Bearer", "GET", DEPLOYMENTS)
            .auth(Auth::Basic)
            .expect(401, "auth.missing_token"),
        row(
            "deployment_manager acting in another organization",
            "GET",
            DEPLOYMENTS,
        )
        .auth(Auth::Manager)
        .header("x-floe-organization", OTHER_ORG)
        .expect(403, "auth.forbidden"),
        row(
            "platform_admin naming an invalid organization",
            "GET",
            DEPLOYMENTS,
        )
        .header("x-floe-organization", "Not An Org")
        .expect(400, "validation.organization")
        .fields(&["x-floe-organization"]),
        row(
            "idempotency key reused with another body",
            "POST",
            DEPLOYMENTS,
        )
        .header("idempotency-key", IDEMPOTENCY_KEY)
        .json(deployment("idem-second", None, &[]))
        .expect(409, "request.idempotency_key_reused"),
        row("idempotency key of 200 characters", "POST", DEPLOYMENTS)
            .header("idempotency-key", "k".repeat(200))
            .json(dep_with(|_| {}))
            .expect(400, "validation.idempotency_key")
            .fields(&["Idempotency-Key"]),
        row(
            "unknown query parameter on create",
            "POST",
            format!("{DEPLOYMENTS}?dry_run=true"),
        )
        .json(dep_with(|_| {}))
        .expect(400, "validation.unknown_parameter")
        .fields(&["dry_run"]),
        row(
            "another organization's deployment",
            "GET",
            format!("{DEPLOYMENTS}/{{other_dep}}"),
        )
        .auth(Auth::Manager)
        .expect(404, "deployments.deployment_not_found"),
        row(
            "updating another organization's deployment",
            "PUT",
            format!("{DEPLOYMENTS}/{{other_dep}}"),
        )
        .auth(Auth::Manager)
        .json(dep_with(|_| {}))
        .expect(404, "deployments.deployment_not_found"),
        row(
            "deleting another organization's deployment",
            "DELETE",
            format!("{DEPLOYMENTS}/{{other_dep}}"),
        )
        .auth(Auth::Manager)
        .expect(404, "deployments.deployment_not_found"),
        row(
            "id with '/' (URL-encoded)",
            "GET",
            format!("{DEPLOYMENTS}/a%2Fb"),
        )
        .expect(404, "deployments.deployment_not_found"),
        row(
            "id '..' (sent verbatim)",
            "GET",
            format!("{DEPLOYMENTS}/.."),
        )
        .raw()
        .expect(404, "deployments.deployment_not_found"),
        row(
            "id that is not UTF-8 (%FF)",
            "GET",
            format!("{DEPLOYMENTS}/%FF"),
        )
        .expect(404, "root.not_found"),
        row("stale If-Match", "PUT", format!("{DEPLOYMENTS}/{{dep}}"))
            .header("if-match", "\"9\"")
            .json(deployment("logs-prod", Some(REPO), &["{pol}"]))
            .expect(412, "request.version_mismatch"),
        row(
            "stale ?version=",
            "PUT",
            format!("{DEPLOYMENTS}/{{dep}}?version=9"),
        )
        .json(deployment("logs-prod", Some(REPO), &["{pol}"]))
        .expect(412, "request.version_mismatch"),
        row(
            "If-Match that is not an ETag",
            "PUT",
            format!("{DEPLOYMENTS}/{{dep}}"),
        )
        .header("if-match", "yesterday")
        .json(deployment("logs-prod", Some(REPO), &["{pol}"]))
        .expect(400, "validation.if_match")
        .fields(&["If-Match"]),
        row(
            "If-Match and ?version= disagree",
            "PUT",
            format!("{DEPLOYMENTS}/{{dep}}?version=2"),
        )
        .header("if-match", "\"1\"")
        .json(deployment("logs-prod", Some(REPO), &["{pol}"]))
        .expect(400, "validation.version")
        .fields(&["version"]),
        row(
            "changing node groups while the create plan is pending",
            "PUT",
            format!("{DEPLOYMENTS}/{{dep}}"),
        )
        .header("if-match", "\"1\"")
        .json({
            let mut d = deployment("logs-prod", Some(REPO), &["{pol}"]);
            d["node_groups"][0]["count"] = json!(5);
            d
        })
        .expect(409, "deployments.plan_in_progress"),
        row(
            "invalid body on an existing deployment",
            "PUT",
            format!("{DEPLOYMENTS}/{{dep}}"),
        )
        .json({
            let mut d = deployment("logs-prod", Some(REPO), &["{pol}"]);
            d["node_groups"][0]["count"] = json!(0);
            d
        })
        .expect(400, "validation.range")
        .fields(&["node_groups[0].count"]),
        row(
            "deleting a deployment that is not stopped",
            "DELETE",
            format!("{DEPLOYMENTS}/{{dep}}"),
        )
        .auth(Auth::Manager)
        .expect(409, "deployments.deployment_not_stopped"),
        row(
            "deployment_viewer deleting",
            "DELETE",
            format!("{DEPLOYMENTS}/{{dep}}"),
        )
        .auth(Auth::Viewer)
        .expect(403, "auth.forbidden"),
        row(
            "list: bad cursor",
            "GET",
            format!("{DEPLOYMENTS}?cursor=!!!"),
        )
        .auth(Auth::Viewer)
        .expect(400, "validation.cursor")
        .fields(&["cursor"]),
        row(
            "list: unknown query parameter",
            "GET",
            format!("{DEPLOYMENTS}?colour=blue"),
        )
        .auth(Auth::Viewer)
        .expect(400, "validation.unknown_parameter")
        .fields(&["colour"]),
        row(
            "list: unknown status",
            "GET",
            format!("{DEPLOYMENTS}?status=bogus"),
        )
        .auth(Auth::Viewer)
        .expect(400, "validation.unknown_value")
        .fields(&["status"]),
        row(
            "list: tag filter without ':'",
            "GET",
            format!("{DEPLOYMENTS}?tag=team"),
        )
        .auth(Auth::Viewer)
        .expect(400, "validation.tag")
        .fields(&["tag"]),
        row(
            "list: tag filter with an empty key",
            "GET",
            format!("{DEPLOYMENTS}?tag=:search"),
        )
        .auth(Auth::Viewer)
        .expect(400, "validation.tag")
        .fields(&["tag"]),
        // Issue 33: the filter `tag=a:b:c` splits at the first ':', so a
        // key may not hold one.
        row("a tag key with ':'", "POST", DEPLOYMENTS)
            .json(dep_with(|d| {
                d["metadata"] = json!({"tags": [{"key": "a:b", "value": "c"}]})
            }))
            .expect(400, "validation.tag")
            .fields(&["metadata.tags[0].key"]),
        row("list: size 0", "GET", format!("{DEPLOYMENTS}?size=0"))
            .auth(Auth::Viewer)
            .expect(400, "validation.range")
            .fields(&["size"]),
        row("method the path does not take", "PATCH", DEPLOYMENTS)
            .expect(405, "root.method_not_allowed"),
        // ---- the proxy's own errors, in the API's shape (issue 33: an
        // escape that is not UTF-8 got axum's plain-text 400) ----
        row(
            "proxy: an escape that does not decode to UTF-8",
            "GET",
            format!("{DEPLOYMENTS}/{{dep}}/elasticsearch/main-elasticsearch/proxy/a%ff"),
        )
        .raw()
        .expect(400, "proxy.path")
        .fields(&["path"]),
        row(
            "proxy: a % without two hex digits",
            "GET",
            format!("{DEPLOYMENTS}/{{dep}}/elasticsearch/main-elasticsearch/proxy/a%zz"),
        )
        .raw()
        .expect(400, "proxy.path")
        .fields(&["path"]),
        row(
            "proxy: a deployment id that does not decode to UTF-8",
            "GET",
            format!("{DEPLOYMENTS}/%ff/elasticsearch/main-elasticsearch/proxy/_cat/health"),
        )
        .raw()
        .expect(404, "deployments.deployment_not_found"),
        // ---- a deployment's snapshots ----
        row("snapshot: date math without its closing >", "POST", format!("{DEPLOYMENTS}/{{dep}}/snapshots"))
            .auth(Auth::Manager)
            .json(json!({"name": "<nightly-{now/d}"}))
            .expect(400, "validation.snapshot_name")
            .fields(&["name"]),
        row("snapshot: upper-case name", "POST", format!("{DEPLOYMENTS}/{{dep}}/snapshots"))
            .auth(Auth::Manager)
            .json(json!({"name": "Nightly"}))
            .expect(400, "validation.snapshot_name")
            .fields(&["name"]),
        row("snapshot: index pattern with a space", "POST", format!("{DEPLOYMENTS}/{{dep}}/snapshots"))
            .auth(Auth::Manager)
            .json(json!({"indices": ["logs-*", "bad index"]}))
            .expect(400, "validation.index_pattern")
            .fields(&["indices[1]"]),
        row("snapshot: indices is not a list", "POST", format!("{DEPLOYMENTS}/{{dep}}/snapshots"))
            .auth(Auth::Manager)
            .json(json!({"indices": "logs-*"}))
            .expect(400, "validation.type")
            .fields(&["indices"]),
        row("snapshot: unknown field", "POST", format!("{DEPLOYMENTS}/{{dep}}/snapshots"))
            .auth(Auth::Manager)
            .json(json!({"nmae": "nightly"}))
            .expect(400, "validation.unknown_field")
            .fields(&["nmae"]),
        row(
            "snapshot: wait_for_completion is not a boolean",
            "POST",
            format!("{DEPLOYMENTS}/{{dep}}/snapshots?wait_for_completion=maybe"),
        )
        .auth(Auth::Manager)
        .expect(400, "validation.boolean")
        .fields(&["wait_for_completion"]),
        row("snapshot: deployment_viewer taking one", "POST", format!("{DEPLOYMENTS}/{{dep}}/snapshots"))
            .auth(Auth::Viewer)
            .expect(403, "auth.forbidden"),
        row(
            "snapshot: another organization's deployment",
            "POST",
            format!("{DEPLOYMENTS}/{{other_dep}}/snapshots"),
        )
        .auth(Auth::Manager)
        .expect(404, "deployments.deployment_not_found"),
        row("snapshots: size 0", "GET", format!("{DEPLOYMENTS}/{{dep}}/snapshots?size=0"))
            .auth(Auth::Viewer)
            .expect(400, "validation.range")
            .fields(&["size"]),
        row("snapshots: bad cursor", "GET", format!("{DEPLOYMENTS}/{{dep}}/snapshots?cursor=!!!"))
            .auth(Auth::Viewer)
            .expect(400, "validation.cursor")
            .fields(&["cursor"]),
        row("snapshots: unknown parameter", "GET", format!("{DEPLOYMENTS}/{{dep}}/snapshots?state=SUCCESS"))
            .auth(Auth::Viewer)
            .expect(400, "validation.unknown_parameter")
            .fields(&["state"]),
        row("snapshot: unknown name", "GET", format!("{DEPLOYMENTS}/{{dep}}/snapshots/no-such-snapshot"))
            .auth(Auth::Viewer)
            .expect(404, "snapshots.snapshot_not_found"),
        row("snapshot: deleting an unknown one", "DELETE", format!("{DEPLOYMENTS}/{{dep}}/snapshots/no-such-snapshot"))
            .auth(Auth::Manager)
            .expect(404, "snapshots.snapshot_not_found"),
        row("snapshot: deployment_viewer deleting", "DELETE", format!("{DEPLOYMENTS}/{{dep}}/snapshots/no-such-snapshot"))
            .auth(Auth::Viewer)
            .expect(403, "auth.forbidden"),
        // ---- snapshot policies ----
        row("interval under 1 minute (30s)", "POST", POLICIES)
            .auth(Auth::Manager)
            .json(pol_with(|p| p["schedule"] = json!({"interval": "30s"})))
            .expect(400, "validation.interval")
            .fields(&["schedule.interval"]),
        row("interval past any sum (150000000000000d)", "POST", POLICIES)
            .auth(Auth::Manager)
            .json(pol_with(|p| p["schedule"] = json!({"interval": "150000000000000d"})))
            .expect(400, "validation.interval")
            .fields(&["schedule.interval"]),
        row("bad cron", "POST", POLICIES)
            .auth(Auth::Manager)
            .json(pol_with(|p| p["schedule"] = json!({"cron": "every day"})))
            .expect(400, "validation.cron")
            .fields(&["schedule.cron"]),
        row("bad time zone", "POST", POLICIES)
            .auth(Auth::Manager)
            .json(pol_with(
                |p| {
                    p["schedule"] = json!({"cron": "0 30 1 * * ?", "timezone": "Mars/Olympus_Mons"})
                },
            ))
            .expect(400, "validation.timezone")
            .fields(&["schedule.timezone"]),
        row("both interval and cron", "POST", POLICIES)
            .auth(Auth::Manager)
            .json(pol_with(|p| {
                p["schedule"] = json!({"interval": "30m", "cron": "0 30 1 * * ?"})
            }))
            .expect(400, "validation.schedule")
            .fields(&["schedule"]),
        row("min_count > max_count", "POST", POLICIES)
            .auth(Auth::Manager)
            .json(pol_with(|p| {
                p["retention"] = json!({"min_count": 10, "max_count": 5})
            }))
            .expect(400, "validation.range")
            .fields(&["retention.min_count"]),
        row("bad retention time value", "POST", POLICIES)
            .auth(Auth::Manager)
            .json(pol_with(|p| {
                p["retention"] = json!({"expire_after": "a week"})
            }))
            .expect(400, "validation.time_value")
            .fields(&["retention.expire_after"]),
        row("unknown nested field", "POST", POLICIES)
            .auth(Auth::Manager)
            .json(pol_with(|p| p["schedule"]["every"] = json!("hour")))
            .expect(400, "validation.unknown_field")
            .fields(&["schedule.every"]),
        row("repository that does not exist", "POST", POLICIES)
            .auth(Auth::Manager)
            .json(pol_with(|p| p["repository"] = json!("no-such-repo")))
            .expect(400, "validation.repository_not_found")
            .fields(&["repository"]),
        row("another organization's repository", "POST", POLICIES)
            .auth(Auth::Manager)
            .json(pol_with(|p| p["repository"] = json!(OTHER_REPO)))
            .expect(400, "validation.repository_not_found")
            .fields(&["repository"]),
        row("deployment_viewer creating", "POST", POLICIES)
            .auth(Auth::Viewer)
            .json(pol_with(|_| {}))
            .expect(403, "auth.forbidden"),
        row(
            "a JSON array instead of an object (serde's positional form)",
            "POST",
            POLICIES,
        )
        .auth(Auth::Manager)
        .text(
            format!(r#"["array-policy",["30m",null,null],"snap","{REPO}",[],true,null,true]"#),
            json_ct,
        )
        .expect(400, "validation.type")
        .fields(&["body"]),
        row("malformed JSON", "POST", POLICIES)
            .auth(Auth::Manager)
            .text("{\"name\": ", json_ct)
            .expect(400, "request.malformed_json"),
        row("wrong content type", "POST", POLICIES)
            .auth(Auth::Manager)
            .text(pol_with(|_| {}).to_string(), Some("application/xml"))
            .expect(415, "request.unsupported_media_type"),
        row(
            "unknown query parameter on create",
            "POST",
            format!("{POLICIES}?request_id=abc"),
        )
        .auth(Auth::Manager)
        .json(pol_with(|_| {}))
        .expect(400, "validation.unknown_parameter")
        .fields(&["request_id"]),
        row(
            "another organization's policy",
            "GET",
            format!("{POLICIES}/{{other_pol}}"),
        )
        .auth(Auth::Manager)
        .expect(404, "policies.policy_not_found"),
        row(
            "updating another organization's policy",
            "PUT",
            format!("{POLICIES}/{{other_pol}}"),
        )
        .auth(Auth::Manager)
        .json(pol_with(|_| {}))
        .expect(404, "policies.policy_not_found"),
        row(
            "deleting another organization's policy",
            "DELETE",
            format!("{POLICIES}/{{other_pol}}"),
        )
        .auth(Auth::Manager)
        .expect(404, "policies.policy_not_found"),
        row(
            "id that is not an id",
            "GET",
            format!("{POLICIES}/not-an-id"),
        )
        .auth(Auth::Viewer)
        .expect(404, "policies.policy_not_found"),
        row(
            "deployment_viewer updating a policy",
            "PUT",
            format!("{POLICIES}/{{pol}}"),
        )
        .auth(Auth::Viewer)
        .json(pol_with(|_| {}))
        .expect(403, "auth.forbidden"),
        row(
            "token signed with another secret",
            "DELETE",
            format!("{POLICIES}/{{pol}}"),
        )
        .auth(Auth::ForeignSecret)
        .expect(401, "auth.bad_signature"),
        row("stale If-Match", "PUT", format!("{POLICIES}/{{pol}}"))
            .auth(Auth::Manager)
            .header("if-match", "\"9\"")
            .json(pol_with(|_| {}))
            .expect(412, "request.version_mismatch"),
        row(
            "invalid body on an existing policy",
            "PUT",
            format!("{POLICIES}/{{pol}}"),
        )
        .auth(Auth::Manager)
        .json(pol_with(|p| p["schedule"] = json!({"interval": "30s"})))
        .expect(400, "validation.interval")
        .fields(&["schedule.interval"]),
        row(
            "stale ?version= on delete",
            "DELETE",
            format!("{POLICIES}/{{pol}}?version=9"),
        )
        .auth(Auth::Manager)
        .expect(412, "request.version_mismatch"),
        row(
            "deleting a policy a deployment has attached",
            "DELETE",
            format!("{POLICIES}/{{pol}}"),
        )
        .auth(Auth::Manager)
        .expect(409, "policies.policy_in_use"),
        row("list: bad cursor", "GET", format!("{POLICIES}?cursor=!!!"))
            .auth(Auth::Viewer)
            .expect(400, "validation.cursor")
            .fields(&["cursor"]),
        row("list: missing token", "GET", POLICIES)
            .auth(Auth::Missing)
            .expect(401, "auth.missing_token"),
        // ---- instance types ----
        row(
            "unknown architecture",
            "GET",
            format!("{INSTANCE_TYPES}?arch=sparc"),
        )
        .auth(Auth::Viewer)
        .expect(400, "validation.unknown_value")
        .fields(&["arch"]),
        row(
            "unknown query parameter",
            "GET",
            format!("{INSTANCE_TYPES}?family=m6g"),
        )
        .auth(Auth::Viewer)
        .expect(400, "validation.unknown_parameter")
        .fields(&["family"]),
        row("missing token", "GET", INSTANCE_TYPES)
            .auth(Auth::Missing)
            .expect(401, "auth.missing_token"),
        row("expired token", "GET", INSTANCE_TYPES)
            .auth(Auth::Expired)
            .expect(401, "auth.token_expired"),
        // ---- anything else ----
        row("path the API does not have", "GET", "/api/v1/deployment")
            .expect(404, "root.not_found"),
    ]
}

/// What the rows may refer to, and the tokens they are sent with.
struct World {
    admin: String,
    manager: String,
    viewer: String,
    other_admin: String,
    expired: String,
    wrong_audience: String,
    alg_none: String,
    foreign: String,
    no_role: String,
    no_org: String,
    wrong_issuer: String,
    not_yet_valid: String,
    hs512: String,
    dep: String,
    pol: String,
    idem_dep: String,
    other_dep: String,
    other_pol: String,
}

impl World {
    fn token(&self, auth: Auth) -> Option<String> {
        let bearer = |t: &str| Some(format!("Bearer {t}"));
        match auth {
            Auth::Admin => bearer(&self.admin),
            Auth::Manager => bearer(&self.manager),
            Auth::Viewer => bearer(&self.viewer),
            Auth::Missing => None,
            Auth::Basic => Some("Basic YWRtaW46YWRtaW4=".to_string()),
            Auth::Garbage => bearer("not-a-jwt"),
            Auth::Expired => bearer(&self.expired),
            Auth::WrongAudience => bearer(&self.wrong_audience),
            Auth::AlgNone => bearer(&self.alg_none),
            Auth::ForeignSecret => bearer(&self.foreign),
            Auth::NoRole => bearer(&self.no_role),
            Auth::NoOrg => bearer(&self.no_org),
            Auth::WrongIssuer => bearer(&self.wrong_issuer),
            Auth::NotYetValid => bearer(&self.not_yet_valid),
            Auth::Hs512 => bearer(&self.hs512),
        }
    }

    fn fill(&self, text: &str) -> String {
        text.replace("{dep}", &self.dep)
            .replace("{pol}", &self.pol)
            .replace("{other_dep}", &self.other_dep)
            .replace("{other_pol}", &self.other_pol)
    }
}

fn created_id(r: &Reply) -> Result<String, String> {
    r.json()
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("no id in {}", r.describe()))
}

async fn seed(s: &Server) -> Result<World, Box<dyn std::error::Error>> {
    let admin = s.token(ORG, &["platform_admin"]);
    let other_admin = s.token(OTHER_ORG, &["platform_admin"]);
    for (token, name, bucket) in [
        (&admin, REPO, "acme-snapshots"),
        (&other_admin, OTHER_REPO, "globex-snapshots"),
    ] {
        s.call(
            Call::put(format!("{REPOSITORIES}/{name}"))
                .bearer(token)
                .json(&s3_repository(bucket)),
        )
        .await
        .expect_status(201);
    }
    let pol = created_id(
        s.call(
            Call::post(POLICIES)
                .bearer(&admin)
                .json(&policy("every-30-minutes", REPO)),
        )
        .await
        .expect_status(201),
    )?;
    let other_pol = created_id(
        s.call(
            Call::post(POLICIES)
                .bearer(&other_admin)
                .json(&policy("globex-hourly", OTHER_REPO)),
        )
        .await
        .expect_status(201),
    )?;
    let dep = created_id(
        s.call(Call::post(DEPLOYMENTS).bearer(&admin).json(&deployment(
            "logs-prod",
            Some(REPO),
            &[&pol],
        )))
        .await
        .expect_status(201),
    )?;
    let other_dep = created_id(
        s.call(
            Call::post(DEPLOYMENTS)
                .bearer(&other_admin)
                .json(&deployment("globex-logs", Some(OTHER_REPO), &[&other_pol])),
        )
        .await
        .expect_status(201),
    )?;
    let idem_dep = created_id(
        s.call(
            Call::post(DEPLOYMENTS)
                .bearer(&admin)
                .header("idempotency-key", IDEMPOTENCY_KEY)
                .json(&deployment("idem-first", None, &[])),
        )
        .await
        .expect_status(201),
    )?;
    let crafted = |change: &dyn Fn(&mut Value)| {
        let mut claims = Server::claims(ORG, &["platform_admin"]);
        change(&mut claims);
        s.sign(&claims)
    };
    let hs512 = {
        let key = jsonwebtoken::EncodingKey::from_secret(&s.jwt_secret())?;
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS512),
            &Server::claims(ORG, &["platform_admin"]),
            &key,
        )?
    };
    Ok(World {
        no_role: crafted(&|c| c["roles"] = json!(["superuser"])),
        no_org: crafted(&|c| {
            if let Some(m) = c.as_object_mut() {
                m.remove("org");
            }
        }),
        wrong_issuer: crafted(&|c| c["iss"] = json!("someone-else")),
        not_yet_valid: crafted(&|c| c["nbf"] = json!(floe_tests::now_secs() + 3600)),
        hs512,
        manager: s.token(ORG, &["deployment_manager"]),
        viewer: s.token(ORG, &["deployment_viewer"]),
        expired: s.expired_token(ORG, &["platform_admin"]),
        wrong_audience: s.wrong_audience_token(ORG, &["platform_admin"]),
        alg_none: Server::alg_none_token(ORG, &["platform_admin"]),
        foreign: Server::foreign_secret_token(ORG, &["platform_admin"]),
        admin,
        other_admin,
        dep,
        pol,
        idem_dep,
        other_dep,
        other_pol,
    })
}

/// Everything both organizations can see: every list, and every seeded
/// resource read one by one (lists would not show a version bump alone).
async fn state_of_the_world(s: &Server, w: &World) -> Vec<String> {
    let mut reads = Vec::new();
    for token in [&w.admin, &w.other_admin] {
        for list in [REPOSITORIES, DEPLOYMENTS, POLICIES] {
            reads.push((token, format!("{list}?size=100")));
        }
    }
    for path in [
        format!("{REPOSITORIES}/{REPO}"),
        format!("{DEPLOYMENTS}/{}", w.dep),
        format!("{DEPLOYMENTS}/{}", w.idem_dep),
        format!("{POLICIES}/{}", w.pol),
    ] {
        reads.push((&w.admin, path));
    }
    for path in [
        format!("{REPOSITORIES}/{OTHER_REPO}"),
        format!("{DEPLOYMENTS}/{}", w.other_dep),
        format!("{POLICIES}/{}", w.other_pol),
    ] {
        reads.push((&w.other_admin, path));
    }
    let mut out = Vec::new();
    for (token, path) in reads {
        let r = s.call(Call::get(path.clone()).bearer(token)).await;
        let etag = r.header("etag").unwrap_or("-").to_string();
        out.push(format!("GET {path} -> {} etag={etag} {}", r.status, r.body));
    }
    out
}

/// What is wrong with `reply` as the answer to `row` (empty when right).
fn judge(row: &Row, reply: &Reply) -> Vec<String> {
    let mut problems = Vec::new();
    if reply.status >= 500 {
        problems.push(format!("a {} for a client's mistake", reply.status));
    }
    if reply.status < 400 {
        problems.push(format!(
            "accepted with {} instead of refused with {}",
            reply.status, row.status
        ));
        return problems;
    }
    if reply.status != row.status {
        problems.push(format!("status {} instead of {}", reply.status, row.status));
    }
    if reply.status == 401
        && !reply
            .header("www-authenticate")
            .is_some_and(|v| v.starts_with("Bearer"))
    {
        problems.push("a 401 without `WWW-Authenticate: Bearer`".into());
    }
    match ece_error(reply) {
        Err(p) => problems.push(format!("not an ECE error: {p}")),
        Ok(errors) => {
            let codes = reply.error_codes();
            if !codes.iter().any(|c| c == row.code) {
                problems.push(format!("codes {codes:?} do not include {}", row.code));
            }
            let fields = error_fields(&errors);
            for f in &row.fields {
                if !fields.contains(f) {
                    problems.push(format!("fields {fields:?} do not include {f:?}"));
                }
            }
        }
    }
    problems
}

/// The neighbourhood of the first difference between two reads (the reads
/// are long; the change is what matters).
fn difference(before: &str, after: &str) -> String {
    let at = before
        .chars()
        .zip(after.chars())
        .take_while(|(b, a)| b == a)
        .count();
    let around = |text: &str| -> String {
        let start = at.saturating_sub(120);
        let shown: String = text.chars().skip(start).take(240).collect();
        if start > 0 {
            format!("…{shown}…")
        } else {
            format!("{shown}…")
        }
    };
    let head: String = before.chars().take_while(|c| *c != '{').collect();
    format!(
        "{head}\n      before: {}\n      after:  {}",
        around(before),
        around(after)
    )
}

#[tokio::test]
async fn every_bad_request_is_refused_precisely_and_changes_nothing() -> TestResult {
    run_table("sqlite", &Server::start()).await
}

/// The same table on the production store: the errors a client sees must
/// not depend on the backend.
#[tokio::test]
async fn every_bad_request_on_dynamodb() -> TestResult {
    run_table("dynamodb", &Server::start_dynamodb()).await
}

async fn run_table(store: &str, s: &Server) -> TestResult {
    let w = seed(s).await?;
    let rows = table();
    assert!(rows.len() >= 45, "the table should have at least 45 rows");
    let mut failures = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let path = w.fill(&row.path);
        let fields = if row.fields.is_empty() {
            String::new()
        } else {
            format!(" {:?}", row.fields)
        };
        println!(
            "{store} row {:>3}: {:<6} {:<70} {:?} -> {} {}{fields}  ({})",
            i + 1,
            row.method,
            if path.len() > 70 {
                format!("{}…", &path[..69])
            } else {
                path.clone()
            },
            row.auth,
            row.status,
            row.code,
            row.what
        );

        let mut call = Call::new(row.method, path);
        if let Some(auth) = w.token(row.auth) {
            call = call.header("authorization", &auth);
        }
        for (k, v) in &row.headers {
            call = call.header(k, v);
        }
        call = match &row.body {
            Body::None => call,
            Body::Json(v) => call
                .header("content-type", "application/json")
                .bytes(w.fill(&v.to_string()).into_bytes()),
            Body::Text(t, ct) => {
                let call = match ct {
                    Some(ct) => call.header("content-type", ct),
                    None => call,
                };
                call.bytes(w.fill(t).into_bytes())
            }
        };
        if row.raw {
            call = call.raw();
        }

        let before = state_of_the_world(s, &w).await;
        let reply = s.call(call).await;
        let after = state_of_the_world(s, &w).await;

        let mut problems = judge(row, &reply);
        for (b, a) in before.iter().zip(&after) {
            if b != a {
                problems.push(format!("something changed: {}", difference(b, a)));
            }
        }
        if !problems.is_empty() {
            println!("{store} row {:>3} FAILED: {}", i + 1, problems.join("; "));
            let body: String = reply.body.chars().take(600).collect();
            failures.push(format!(
                "row {} ({} {} — {}):\n    {}\n    got {} {body}",
                i + 1,
                row.method,
                row.path,
                row.what,
                problems.join("\n    "),
                reply.status
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{store}: {} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
    Ok(())
}
