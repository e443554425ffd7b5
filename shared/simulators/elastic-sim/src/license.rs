//! Licensing, as Elasticsearch 8 answers and enforces it:
//!
//! - the APIs: `GET _license`, installing one (`PUT|POST _license`),
//!   `DELETE _license`, `POST _license/start_basic`,
//!   `POST _license/start_trial`, `GET _license/trial_status` and
//!   `GET _license/basic_status`;
//! - the checks licensed features make: searchable snapshots need an active
//!   `enterprise` or `trial` license, and a secured cluster whose license is
//!   no longer active refuses its health and stats APIs.
//!
//! A new cluster runs the self-generated `basic` license. A cluster may
//! start one trial in its life; that it did is kept beside the license (so
//! on the data path too), as Elasticsearch keeps it in its license
//! metadata. Whether a license is active is worked out from the clock on
//! every request, so a license expires while the cluster runs.
//!
//! The simulator cannot check Elastic's signature on an installed license:
//! it takes one as sent (Elasticsearch answers `license_status: invalid`
//! to a license whose signature does not verify).

use crate::error::ApiError;
use crate::search_support::check_params;
use crate::server::{ApiResult, Reply, Req};
use crate::state::Sim;
use crate::util::{iso_millis, now_millis, parse_bool, parse_time};
use axum::http::{Method, StatusCode};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use std::fmt;
use std::sync::{MutexGuard, PoisonError};

/// How long a self-generated trial lasts.
const TRIAL_MILLIS: i64 = 30 * 24 * 3600 * 1000;
/// The nodes (or, for `enterprise`, resource units) a self-generated
/// license allows.
const SELF_GENERATED_LIMIT: i64 = 1000;
/// What Elasticsearch's license fields hold when a license leaves them out.
const UNSET: i64 = -1;
/// The feature name searchable snapshots are licensed under.
const SEARCHABLE_SNAPSHOTS: &str = "searchable-snapshots";

const INSTALL_BASIC: &str = "Installing basic licenses is no longer allowed. Use the POST /_license/start_basic API to install a basic license that does not expire.";
const NEEDS_ACK: &str = "Operation failed: Needs acknowledgement.";
const PUT_ACK_HEADER: &str = "This license update requires acknowledgement. To acknowledge the license, please read the following messages and update the license again, this time with the \"acknowledge=true\" parameter:";
const BASIC_ACK_HEADER: &str = "This license update requires acknowledgement. To acknowledge the license, please read the following messages and call /start_basic again, this time with the \"acknowledge=true\" parameter:";
const TRIAL_ACK_HEADER: &str = "This API initiates a free 30-day trial for all subscription features. By starting this trial, you agree that it is subject to the terms and conditions at https://www.elastic.co/legal/trial_license/. To begin your free trial, call /start_trial again and specify the \"acknowledge=true\" parameter.";
const TRIAL_ACK_SECURITY: &str =
    "With a trial license, X-Pack security features are available, but are not enabled by default.";

/// A license's operation mode: what it unlocks. Declared in
/// Elasticsearch's order: a mode unlocks what needs it or a lower one, and
/// a trial unlocks everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Mode {
    Missing,
    Trial,
    Basic,
    Standard,
    Gold,
    Platinum,
    Enterprise,
}

impl Mode {
    /// The license types, in the order Elasticsearch lists them.
    const TYPES: [Mode; 6] = [
        Mode::Basic,
        Mode::Standard,
        Mode::Gold,
        Mode::Platinum,
        Mode::Enterprise,
        Mode::Trial,
    ];

    fn name(self) -> &'static str {
        match self {
            Mode::Missing => "missing",
            Mode::Trial => "trial",
            Mode::Basic => "basic",
            Mode::Standard => "standard",
            Mode::Gold => "gold",
            Mode::Platinum => "platinum",
            Mode::Enterprise => "enterprise",
        }
    }

    /// A license type as an API parameter names it: one of the six
    /// current names, in any case.
    fn parse(name: &str) -> Result<Mode, ApiError> {
        let lower = name.to_lowercase();
        Mode::TYPES
            .into_iter()
            .find(|m| m.name() == lower)
            .ok_or_else(|| {
                let names: Vec<&str> = Mode::TYPES.iter().map(|m| m.name()).collect();
                ApiError::illegal_argument(format!(
                    "unrecognised license type [ {name}], supported license types are [{}]",
                    names.join(",")
                ))
            })
    }

    /// The mode a license document's `type` gives it, the names older
    /// licenses use included; `None` for a type Elasticsearch does not know.
    fn of_type(license_type: &str) -> Option<Mode> {
        Some(match license_type.to_lowercase().as_str() {
            "missing" => Mode::Missing,
            "trial" | "none" | "dev" | "development" => Mode::Trial,
            "basic" => Mode::Basic,
            "standard" => Mode::Standard,
            "silver" | "gold" => Mode::Gold,
            "platinum" | "cloud_internal" | "internal" => Mode::Platinum,
            "enterprise" => Mode::Enterprise,
            _ => return None,
        })
    }

    fn unlocks(self, minimum: Mode) -> bool {
        self == Mode::Trial || self >= minimum
    }
}

/// One license, as installed: Elasticsearch's license fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Installed {
    uid: String,
    license_type: String,
    /// `None` for the license a cluster generated for itself when it was
    /// created: issued to the cluster, by its name.
    #[serde(default)]
    issued_to: Option<String>,
    issuer: String,
    issue_date_in_millis: i64,
    /// `None`: never expires (only a self-generated `basic` license).
    expiry_date_in_millis: Option<i64>,
    #[serde(default = "self_generated_limit")]
    max_nodes: Option<i64>,
    #[serde(default)]
    max_resource_units: Option<i64>,
    #[serde(default = "unset")]
    start_date_in_millis: i64,
    /// Kept as sent, never checked.
    #[serde(default)]
    signature: Option<String>,
    /// Installed with `PUT _license` rather than generated by the cluster.
    #[serde(default)]
    uploaded: bool,
}

// Defaults for what data paths written before these fields were kept
// did not hold: every license they held was self-generated.
fn self_generated_limit() -> Option<i64> {
    Some(SELF_GENERATED_LIMIT)
}

fn unset() -> i64 {
    UNSET
}

impl Installed {
    fn self_generated(license_type: &str, issued_to: Option<String>, now: i64) -> Installed {
        // Only the exact name `enterprise` counts resource units, as in
        // Elasticsearch.
        let enterprise = license_type == "enterprise";
        Installed {
            uid: uuid::Uuid::new_v4().to_string(),
            license_type: license_type.to_string(),
            issued_to,
            issuer: "elasticsearch".into(),
            issue_date_in_millis: now,
            expiry_date_in_millis: (license_type != "basic").then_some(now + TRIAL_MILLIS),
            max_nodes: (!enterprise).then_some(SELF_GENERATED_LIMIT),
            max_resource_units: enterprise.then_some(SELF_GENERATED_LIMIT),
            start_date_in_millis: UNSET,
            signature: None,
            uploaded: false,
        }
    }

    fn mode(&self) -> Mode {
        Mode::of_type(&self.license_type).unwrap_or(Mode::Missing)
    }

    /// What `GET _license` calls it: not yet valid, past its expiry, or
    /// active.
    fn status(&self, now: i64) -> &'static str {
        if self.issue_date_in_millis > now {
            "invalid"
        } else if self.expiry_date_in_millis.is_some_and(|e| e < now) {
            "expired"
        } else {
            "active"
        }
    }

    /// Whether its features work now: between its issue and expiry dates
    /// (a license that never expires always).
    fn active(&self, now: i64) -> bool {
        match self.expiry_date_in_millis {
            None => true,
            Some(expiry) => now >= self.issue_date_in_millis && now < expiry,
        }
    }

    fn unlocks(&self, minimum: Mode, now: i64) -> bool {
        self.active(now) && self.mode().unlocks(minimum)
    }

    /// A basic license the cluster generated, which never expires: what
    /// `start_basic` would make, so it makes nothing.
    fn is_lasting_basic(&self) -> bool {
        self.license_type == "basic"
            && self.max_nodes == Some(SELF_GENERATED_LIMIT)
            && self.expiry_date_in_millis.is_none()
    }

    /// `GET _license`'s view: no signature, dates both as text and as
    /// milliseconds, no expiry for a license that never expires.
    fn view(&self, cluster_name: &str, now: i64) -> Value {
        let mut view = Map::new();
        let mut put = |key: &str, value: Value| {
            view.insert(key.to_string(), value);
        };
        put("status", json!(self.status(now)));
        put("uid", json!(self.uid));
        put("type", json!(self.license_type));
        put("issue_date", json!(iso_millis(self.issue_date_in_millis)));
        put("issue_date_in_millis", json!(self.issue_date_in_millis));
        if let Some(expiry) = self.expiry_date_in_millis {
            put("expiry_date", json!(iso_millis(expiry)));
            put("expiry_date_in_millis", json!(expiry));
        }
        put("max_nodes", json!(self.max_nodes));
        put("max_resource_units", json!(self.max_resource_units));
        put(
            "issued_to",
            json!(self.issued_to.as_deref().unwrap_or(cluster_name)),
        );
        put("issuer", json!(self.issuer));
        put("start_date_in_millis", json!(self.start_date_in_millis));
        Value::Object(view)
    }
}

/// The cluster's license metadata: the license in force, and whether the
/// cluster ever started a trial (it may start only one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct License {
    #[serde(flatten)]
    current: Installed,
    /// `None` in data paths written before it was kept.
    #[serde(default)]
    trial_was_started: Option<bool>,
}

impl License {
    /// A license the cluster generates for itself, as a new cluster does
    /// (`basic`).
    pub fn self_generated(license_type: &str) -> License {
        License {
            current: Installed::self_generated(license_type, None, now_millis()),
            trial_was_started: Some(license_type == "trial"),
        }
    }

    fn trial_was_started(&self) -> bool {
        // Before the fact was kept, a running trial was the only sign of it.
        self.trial_was_started
            .unwrap_or_else(|| self.current.license_type == "trial")
    }

    /// Puts `license` in force; that a trial was started stays.
    fn install(&mut self, license: Installed) {
        self.trial_was_started = Some(self.trial_was_started());
        self.current = license;
    }
}

fn lock(sim: &Sim) -> MutexGuard<'_, License> {
    sim.license.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a licensed feature answers when the license does not allow it.
fn non_compliant(feature: &str) -> ApiError {
    ApiError::of(
        StatusCode::FORBIDDEN,
        "security_exception",
        format!("current license is non-compliant for [{feature}]"),
    )
    .with_field("license.expired.feature", json!(feature))
}

/// Refuses a searchable-snapshot API unless an active `enterprise` (or
/// trial) license is in force.
pub fn require_searchable_snapshots(sim: &Sim) -> Result<(), ApiError> {
    if lock(sim).current.unlocks(Mode::Enterprise, now_millis()) {
        Ok(())
    } else {
        Err(non_compliant(SEARCHABLE_SNAPSHOTS))
    }
}

/// On a secured cluster whose license is no longer active, Elasticsearch's
/// security filter refuses the health and stats actions (cluster health,
/// cluster stats, nodes stats, indices stats) while every read and write
/// of data goes on. The `_cat` APIs refused are those built on them.
pub fn refuse_health_and_stats(sim: &Sim, req: &Req) -> Result<(), ApiError> {
    if !sim.is_secured() || req.method != Method::GET {
        return Ok(());
    }
    let segments: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    let health_or_stats = match segments.as_slice() {
        ["_cluster", "health" | "stats", ..]
        | ["_cat", "health" | "indices" | "nodes" | "shards", ..]
        | ["_nodes", "stats", ..]
        | ["_nodes", _, "stats", ..]
        | ["_stats", ..] => true,
        [index, "_stats", ..] => !index.starts_with('_') || *index == "_all",
        _ => false,
    };
    if health_or_stats && !lock(sim).current.active(now_millis()) {
        return Err(non_compliant("security"));
    }
    Ok(())
}

/// `master_timeout` and `timeout` must read as time values, though a
/// single process never waits on them.
fn check_timeouts(req: &Req) -> Result<(), ApiError> {
    for name in ["master_timeout", "timeout"] {
        if let Some(value) = req.param(name) {
            parse_time(name, value)?;
        }
    }
    Ok(())
}

fn acknowledge_param(req: &Req) -> Result<bool, ApiError> {
    parse_bool("acknowledge", req.param("acknowledge"), false)
}

/// `GET _license`.
pub fn get(sim: &Sim, req: &Req) -> ApiResult {
    check_params(req, &["local", "accept_enterprise"])?;
    parse_bool("local", req.param("local"), false)?;
    // Deprecated in 8.x, where it may only be true.
    if !parse_bool("accept_enterprise", req.param("accept_enterprise"), true)? {
        return Err(ApiError::illegal_argument(
            "The [accept_enterprise] parameters may not be false",
        ));
    }
    let view = lock(sim).current.view(&sim.cluster_name, now_millis());
    Ok(Reply::ok(json!({ "license": view })))
}

/// `GET _license/trial_status`.
pub fn trial_status(sim: &Sim, req: &Req) -> ApiResult {
    check_params(req, &[])?;
    let eligible = !lock(sim).trial_was_started();
    Ok(Reply::ok(json!({ "eligible_to_start_trial": eligible })))
}

/// `GET _license/basic_status`.
pub fn basic_status(sim: &Sim, req: &Req) -> ApiResult {
    check_params(req, &[])?;
    let eligible = lock(sim).current.license_type != "basic";
    Ok(Reply::ok(json!({ "eligible_to_start_basic": eligible })))
}

/// `PUT|POST _license` with `{"license": {...}}` (or the older
/// `{"licenses": [...]}`), checked in Elasticsearch's order.
pub fn put(sim: &Sim, req: &Req) -> ApiResult {
    check_params(req, &["acknowledge", "master_timeout", "timeout"])?;
    if req.body.is_empty() {
        return Err(ApiError::illegal_argument(
            "The license must be provided in the request body",
        ));
    }
    let now = now_millis();
    let sent = read_license(&req.body, now)?;
    let acknowledged = acknowledge_param(req)?;
    check_timeouts(req)?;
    if sent.license_type == "basic" {
        return Err(ApiError::illegal_argument(INSTALL_BASIC));
    }
    // Elasticsearch would first check the signature (answering `invalid`
    // when it does not verify); the simulator cannot.
    if sent.issue_date_in_millis > now || sent.start_date_in_millis > now {
        return Ok(put_answer(true, "invalid", None));
    }
    if sent.mode() == Mode::Basic {
        return Err(ApiError::illegal_argument(
            "Registering basic licenses is not allowed.",
        ));
    }
    // An expired license is reported, not installed.
    if sent.expiry_date_in_millis.is_some_and(|e| e < now) {
        return Ok(put_answer(true, "expired", None));
    }
    let mut license = lock(sim);
    if !acknowledged {
        let messages = acknowledgements(&license.current, &sent);
        if !messages.is_empty() {
            return Ok(put_answer(
                false,
                "valid",
                Some(acknowledge_object(PUT_ACK_HEADER, messages)),
            ));
        }
    }
    tracing::info!(
        cluster = %sim.cluster_name,
        license_type = %sent.license_type,
        uid = %sent.uid,
        "simulated cluster installed a license"
    );
    license.install(sent);
    Ok(put_answer(true, "valid", None))
}

fn put_answer(acknowledged: bool, status: &str, acknowledge: Option<Value>) -> Reply {
    let mut body = json!({ "acknowledged": acknowledged, "license_status": status });
    if let Some(acknowledge) = acknowledge {
        body["acknowledge"] = acknowledge;
    }
    Reply::ok(body)
}

/// `DELETE _license`: back to a self-generated basic license.
pub fn delete(sim: &Sim, req: &Req) -> ApiResult {
    check_params(req, &["master_timeout", "timeout"])?;
    check_timeouts(req)?;
    let mut license = lock(sim);
    if !license.current.is_lasting_basic() {
        let basic =
            Installed::self_generated("basic", Some(sim.cluster_name.clone()), now_millis());
        license.install(basic);
    }
    Ok(Reply::acknowledged())
}

/// `POST _license/start_basic`.
pub fn start_basic(sim: &Sim, req: &Req) -> ApiResult {
    check_params(req, &["acknowledge", "master_timeout", "timeout"])?;
    let acknowledged = acknowledge_param(req)?;
    check_timeouts(req)?;
    let mut license = lock(sim);
    if license.current.is_lasting_basic() {
        return Ok(Reply::with_status(
            StatusCode::FORBIDDEN,
            json!({
                "acknowledged": true,
                "basic_was_started": false,
                "error_message": "Operation failed: Current license is basic.",
            }),
        ));
    }
    let basic = Installed::self_generated("basic", Some(sim.cluster_name.clone()), now_millis());
    if !acknowledged {
        let messages = acknowledgements(&license.current, &basic);
        if !messages.is_empty() {
            return Ok(Reply::ok(json!({
                "acknowledged": false,
                "basic_was_started": false,
                "error_message": NEEDS_ACK,
                "acknowledge": acknowledge_object(BASIC_ACK_HEADER, messages),
            })));
        }
    }
    license.install(basic);
    Ok(Reply::ok(
        json!({ "acknowledged": true, "basic_was_started": true }),
    ))
}

/// `POST _license/start_trial`: a 30-day license of `type` (`trial` unless
/// named), once in a cluster's life.
pub fn start_trial(sim: &Sim, req: &Req) -> ApiResult {
    check_params(req, &["type", "acknowledge", "master_timeout"])?;
    let requested = req.param("type").map_or("trial", String::as_str);
    let acknowledged = acknowledge_param(req)?;
    check_timeouts(req)?;
    let mode = Mode::parse(requested)?;
    if !matches!(
        mode,
        Mode::Gold | Mode::Platinum | Mode::Enterprise | Mode::Trial
    ) {
        return Err(ApiError::illegal_argument(format!(
            "Cannot start trial of type [{}]. Valid trial types are [enterprise,gold,platinum,trial]",
            mode.name()
        )));
    }
    if !acknowledged {
        return Ok(Reply::ok(json!({
            "acknowledged": false,
            "trial_was_started": false,
            "error_message": NEEDS_ACK,
            "acknowledge": {
                "message": TRIAL_ACK_HEADER,
                "security": [TRIAL_ACK_SECURITY],
            },
        })));
    }
    let mut license = lock(sim);
    if license.trial_was_started() {
        return Ok(Reply::with_status(
            StatusCode::FORBIDDEN,
            json!({
                "acknowledged": true,
                "trial_was_started": false,
                "error_message": "Operation failed: Trial was already activated.",
            }),
        ));
    }
    // The type is kept as the request spelled it, as Elasticsearch keeps it.
    license.current =
        Installed::self_generated(requested, Some(sim.cluster_name.clone()), now_millis());
    license.trial_was_started = Some(true);
    tracing::info!(cluster = %sim.cluster_name, license_type = requested, "simulated cluster started a trial");
    Ok(Reply::ok(json!({
        "acknowledged": true,
        "trial_was_started": true,
        "type": requested,
    })))
}

/// `acknowledge` as Elasticsearch prints it: the header, then each
/// feature's messages.
fn acknowledge_object(header: &str, messages: Vec<(&'static str, Vec<String>)>) -> Value {
    let mut object = Map::new();
    object.insert("message".into(), json!(header));
    for (feature, lines) in messages {
        object.insert(feature.into(), json!(lines));
    }
    Value::Object(object)
}

/// What changing from `current` to `new` asks to be acknowledged: an
/// installed license replaced by an older one, and each feature the new
/// license's mode turns off.
fn acknowledgements(current: &Installed, new: &Installed) -> Vec<(&'static str, Vec<String>)> {
    let mut messages = Vec::new();
    if current.uploaded && current.issue_date_in_millis > new.issue_date_in_millis {
        messages.push((
            "license",
            vec![
                "The new license is older than the currently installed license. Are you sure you want to override the current license?"
                    .to_string(),
            ],
        ));
    }
    messages.extend(
        feature_changes(current.mode(), new.mode())
            .into_iter()
            .filter(|(_, lines)| !lines.is_empty()),
    );
    messages
}

/// Each feature's messages for a change of mode, in Elasticsearch's
/// order; empty where the feature is not affected.
fn feature_changes(from: Mode, to: Mode) -> Vec<(&'static str, Vec<String>)> {
    use Mode::{Basic, Enterprise, Gold, Missing, Platinum, Standard, Trial};
    const TOKENS: &str = "Security tokens will not be supported.";
    const DLS: &str = "Field and document level access control will be disabled.";
    const REALMS: &str = "Custom realms will be ignored.";
    const ENGINE: &str = "A custom authorization engine will be ignored.";
    const AUDIT: &str = "IP filtering and auditing will be disabled.";
    let security: &[&str] = match (to, from) {
        (Basic, Standard) => &[TOKENS],
        (Basic, Trial | Gold | Platinum | Enterprise) => &[
            "Authentication will be limited to the native and file realms.",
            TOKENS,
            AUDIT,
            DLS,
            REALMS,
            ENGINE,
        ],
        (Gold, Basic | Standard | Trial | Platinum | Enterprise) => &[DLS, REALMS, ENGINE],
        (Standard, Basic | Gold | Platinum | Enterprise | Trial) => &[
            "Authentication will be limited to the native realms.",
            AUDIT,
            DLS,
            REALMS,
            ENGINE,
        ],
        _ => &[],
    };
    // Paid features a move from platinum-or-better to below it turns off.
    let below_platinum =
        matches!(from, Trial | Platinum | Enterprise) && matches!(to, Basic | Standard | Gold);
    let to_basic_from_paid =
        to == Basic && matches!(from, Trial | Standard | Gold | Platinum | Enterprise);
    let to_basic = to == Basic && from != Basic;
    let when = |on: bool, line: &str| -> Vec<String> {
        if on {
            vec![line.to_string()]
        } else {
            Vec::new()
        }
    };
    vec![
        ("security", security.iter().map(|s| s.to_string()).collect()),
        (
            "watcher",
            when(to_basic_from_paid, "Watcher will be disabled"),
        ),
        (
            "monitoring",
            when(
                to_basic_from_paid,
                "Multi-cluster support is disabled for clusters with [BASIC] license. If you are\nrunning multiple clusters, users won't be able to access the clusters with\n[BASIC] licenses from within a single X-Pack Kibana instance. You will have to deploy a\nseparate and dedicated X-pack Kibana instance for each [BASIC] cluster you wish to monitor.",
            ),
        ),
        ("graph", when(below_platinum, "Graph will be disabled")),
        (
            "ml",
            when(below_platinum, "Machine learning will be disabled"),
        ),
        (
            "logstash",
            when(
                to_basic,
                "Logstash will no longer poll for centrally-managed pipelines",
            ),
        ),
        (
            "beats",
            when(
                to_basic,
                "Beats will no longer be able to use centrally-managed configuration",
            ),
        ),
        (
            "sql",
            when(
                below_platinum,
                "JDBC and ODBC support will be disabled, but you can continue to use SQL CLI and REST endpoint",
            ),
        ),
        (
            "ccr",
            when(
                matches!(from, Trial | Platinum | Enterprise)
                    && matches!(to, Missing | Basic | Standard | Gold),
                "Cross-Cluster Replication will be disabled",
            ),
        ),
        (
            "enterprise_search",
            when(
                below_platinum,
                "Search Applications and behavioral analytics will be disabled",
            ),
        ),
        (
            "redact_processor",
            when(
                below_platinum,
                "Redact ingest pipeline processors will be disabled",
            ),
        ),
    ]
}

/// A JSON object's fields in the order they were sent, their values
/// unread: Elasticsearch reads a license body field by field (only its
/// first field names the license; the last of two fields setting the same
/// value wins).
struct Ordered(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Ordered, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Ordered;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry::<String, Box<RawValue>>()? {
                    fields.push(entry);
                }
                Ok(Ordered(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

fn unreadable(e: &serde_json::Error) -> ApiError {
    ApiError::x_content_parse(format!("failed to parse the body: {e}"))
}

/// `text`'s fields in order, or `None` when it is valid JSON but not an
/// object.
fn ordered(text: &str) -> Result<Option<Ordered>, ApiError> {
    let value: Value = serde_json::from_str(text).map_err(|e| unreadable(&e))?;
    if !value.is_object() {
        return Ok(None);
    }
    serde_json::from_str(text)
        .map(Some)
        .map_err(|e| unreadable(&e))
}

/// The license a `PUT _license` body carries.
fn read_license(body: &[u8], now: i64) -> Result<Installed, ApiError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| ApiError::x_content_parse(format!("failed to parse the body: {e}")))?;
    let Some(Ordered(fields)) = ordered(text)? else {
        return Err(ApiError::parse(
            "failed to parse licenses expected start object",
        ));
    };
    let Some((name, value)) = fields.into_iter().next() else {
        return Err(ApiError::parse("failed to parse licenses expected field"));
    };
    let license = match name.as_str() {
        "license" => Some(build(&fields_of(value.get())?)?),
        "licenses" => {
            let listed: Value = serde_json::from_str(value.get()).map_err(|e| unreadable(&e))?;
            if !listed.is_array() {
                return Err(ApiError::parse(
                    "failed to parse licenses expected an array of licenses",
                ));
            }
            // Read again unread, to keep each license's fields in order.
            let items: Vec<Box<RawValue>> =
                serde_json::from_str(value.get()).map_err(|e| unreadable(&e))?;
            let mut licenses = items
                .iter()
                .map(|item| fields_of(item.get()).and_then(|f| build(&f)))
                .collect::<Result<Vec<_>, _>>()?;
            // The latest issued that has not expired, else the latest issued.
            licenses.sort_by_key(|l| std::cmp::Reverse(l.issue_date_in_millis));
            let unexpired = licenses
                .iter()
                .position(|l| l.expiry_date_in_millis.is_none_or(|e| e > now));
            match unexpired {
                Some(at) => Some(licenses.swap_remove(at)),
                None => licenses.into_iter().next(),
            }
        }
        // Other fields are ignored, as a newer version's might be.
        _ => None,
    };
    // Elasticsearch dereferences the missing license and fails.
    license.ok_or_else(|| {
        null_pointer(
            "Cannot invoke \"org.elasticsearch.license.License.type()\" because the return value of \"org.elasticsearch.license.PutLicenseRequest.license()\" is null",
        )
    })
}

/// A license's fields as values, in order; a value that is not an object
/// holds none.
fn fields_of(text: &str) -> Result<Vec<(String, Value)>, ApiError> {
    let Some(Ordered(fields)) = ordered(text)? else {
        return Ok(Vec::new());
    };
    fields
        .into_iter()
        .map(|(name, raw)| {
            serde_json::from_str(raw.get())
                .map(|value| (name, value))
                .map_err(|e| unreadable(&e))
        })
        .collect()
}

/// The error Elasticsearch answers when it trips over a missing value.
fn null_pointer(why: &str) -> ApiError {
    ApiError::of(
        StatusCode::INTERNAL_SERVER_ERROR,
        "null_pointer_exception",
        why,
    )
}

/// A required field missing from a license (Elasticsearch's license
/// builder refuses it with an `IllegalStateException`, a 500).
fn incomplete(why: impl Into<String>) -> ApiError {
    ApiError::of(
        StatusCode::INTERNAL_SERVER_ERROR,
        "illegal_state_exception",
        why,
    )
}

/// What a field holds as text: strings as they are, numbers and booleans
/// as written.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn not_a_number(value: &Value) -> ApiError {
    ApiError::of(
        StatusCode::BAD_REQUEST,
        "number_format_exception",
        format!("For input string: \"{}\"", text(value)),
    )
}

/// A whole number, from a number or a numeric string (a fraction is cut,
/// as Elasticsearch's parser coerces it).
fn long(value: &Value) -> Result<i64, ApiError> {
    let number = match value {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f.trunc() as i64)),
        Value::String(s) => s
            .trim()
            .parse::<i64>()
            .ok()
            .or_else(|| s.trim().parse::<f64>().ok().map(|f| f.trunc() as i64)),
        _ => None,
    };
    number.ok_or_else(|| not_a_number(value))
}

fn int(value: &Value) -> Result<i64, ApiError> {
    let number = long(value)?;
    if i32::try_from(number).is_err() {
        return Err(not_a_number(value));
    }
    Ok(number)
}

/// A date field: milliseconds, a date-time (`2024-05-01T00:00:00.000Z`) or
/// a date (midnight UTC).
fn date(value: &Value, what: &str) -> Result<i64, ApiError> {
    if let Value::Number(_) = value {
        return long(value);
    }
    let text = text(value);
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(&text) {
        return Ok(at.timestamp_millis());
    }
    chrono::NaiveDate::parse_from_str(&text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|at| at.and_utc().timestamp_millis())
        .ok_or_else(|| ApiError::parse(format!("invalid {what} date format {text}")))
}

/// A license from its fields, refused as Elasticsearch's license builder
/// refuses one: unknown fields are ignored, a missing required one is an
/// error.
fn build(fields: &[(String, Value)]) -> Result<Installed, ApiError> {
    let mut uid = None;
    let mut license_type = None;
    let mut issued_to = None;
    let mut issuer = None;
    let mut signature = None;
    let (mut issued, mut expiry, mut start) = (UNSET, UNSET, UNSET);
    let (mut max_nodes, mut max_resource_units) = (UNSET, UNSET);
    for (name, value) in fields {
        // Objects, arrays and nulls are skipped, as a newer version's
        // fields would be.
        if matches!(value, Value::Object(_) | Value::Array(_) | Value::Null) {
            continue;
        }
        match name.as_str() {
            "uid" => uid = Some(text(value)),
            "type" => license_type = Some(text(value)),
            "issue_date" => issued = date(value, "issue")?,
            "issue_date_in_millis" => issued = long(value)?,
            "expiry_date" => expiry = date(value, "expiration")?,
            "expiry_date_in_millis" => expiry = long(value)?,
            "start_date" => start = date(value, "start")?,
            "start_date_in_millis" => start = long(value)?,
            "max_nodes" => max_nodes = int(value)?,
            "max_resource_units" => max_resource_units = int(value)?,
            "issued_to" => issued_to = Some(text(value)),
            "issuer" => issuer = Some(text(value)),
            "signature" => signature = Some(text(value)),
            _ => {}
        }
    }
    // The type is read before anything is checked; without one,
    // Elasticsearch dereferences nothing.
    let Some(license_type) = license_type else {
        return Err(null_pointer(
            "Cannot invoke \"String.toLowerCase(java.util.Locale)\" because \"name\" is null",
        ));
    };
    if Mode::of_type(&license_type).is_none() {
        return Err(ApiError::illegal_argument(format!(
            "unknown license type [{license_type}]"
        )));
    }
    let Some(issuer) = issuer else {
        return Err(incomplete("issuer can not be null"));
    };
    let Some(issued_to) = issued_to else {
        return Err(incomplete("issuedTo can not be null"));
    };
    if issued == UNSET {
        return Err(incomplete("issueDate has to be set"));
    }
    let Some(uid) = uid else {
        return Err(incomplete("uid can not be null"));
    };
    // No expiry means "never", which only a basic license may have.
    if expiry == UNSET && license_type != "basic" {
        return Err(incomplete(
            "only basic licenses are allowed to have no expiration",
        ));
    }
    if license_type == "enterprise" {
        if max_resource_units == UNSET {
            return Err(incomplete(format!(
                "maxResourceUnits must be set for enterprise licenses (type=[{license_type}])"
            )));
        }
        if max_nodes != UNSET {
            return Err(incomplete(format!(
                "maxNodes may not be set for enterprise licenses (type=[{license_type}])"
            )));
        }
    } else {
        if max_nodes == UNSET {
            return Err(incomplete("maxNodes has to be set"));
        }
        if max_resource_units != UNSET {
            return Err(incomplete(format!(
                "maxResourceUnits may only be set for enterprise licenses (not permitted for type=[{license_type}])"
            )));
        }
    }
    let set = |n: i64| (n != UNSET).then_some(n);
    Ok(Installed {
        uid,
        license_type,
        issued_to: Some(issued_to),
        issuer,
        issue_date_in_millis: issued,
        expiry_date_in_millis: set(expiry),
        max_nodes: set(max_nodes),
        max_resource_units: set(max_resource_units),
        start_date_in_millis: start,
        signature,
        uploaded: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn license(license_type: &str) -> Installed {
        Installed::self_generated(license_type, None, now_millis())
    }

    #[test]
    fn modes_unlock_their_level_and_below_and_a_trial_everything() {
        assert!(Mode::Trial.unlocks(Mode::Enterprise));
        assert!(Mode::Enterprise.unlocks(Mode::Enterprise));
        assert!(!Mode::Platinum.unlocks(Mode::Enterprise));
        assert!(!Mode::Basic.unlocks(Mode::Enterprise));
        assert_eq!(Mode::of_type("silver"), Some(Mode::Gold));
        assert_eq!(Mode::of_type("nope"), None);
        assert!(Mode::parse("silver").is_err());
    }

    #[test]
    fn a_license_expires_with_the_clock() {
        let mut trial = license("trial");
        let now = now_millis();
        assert!(trial.active(now));
        assert_eq!(trial.status(now), "active");
        trial.expiry_date_in_millis = Some(now - 1);
        assert!(!trial.active(now));
        assert_eq!(trial.status(now), "expired");
        assert!(!trial.unlocks(Mode::Enterprise, now));
        // A basic license never expires.
        assert!(license("basic").active(i64::MAX));
    }

    #[test]
    fn downgrades_ask_for_acknowledgement_and_upgrades_do_not() {
        let trial = license("trial");
        let basic = license("basic");
        let enterprise = license("enterprise");
        let features: Vec<&str> = acknowledgements(&trial, &basic)
            .iter()
            .map(|(f, _)| *f)
            .collect();
        assert_eq!(
            features,
            [
                "security",
                "watcher",
                "monitoring",
                "graph",
                "ml",
                "logstash",
                "beats",
                "sql",
                "ccr",
                "enterprise_search",
                "redact_processor"
            ]
        );
        assert!(acknowledgements(&basic, &enterprise).is_empty());
        assert!(acknowledgements(&trial, &enterprise).is_empty());
        // Gold turns off document level security whatever it replaces.
        assert_eq!(acknowledgements(&basic, &license("gold")).len(), 1);
    }

    #[test]
    fn data_paths_written_before_the_trial_flag_still_load() -> Result<(), serde_json::Error> {
        let old = json!({
            "uid": "u", "license_type": "trial", "issued_to": "elasticsearch",
            "issuer": "elasticsearch", "issue_date_in_millis": 1, "expiry_date_in_millis": 2
        });
        let loaded: License = serde_json::from_value(old)?;
        assert!(loaded.trial_was_started());
        assert_eq!(loaded.current.max_nodes, Some(SELF_GENERATED_LIMIT));
        let again: License = serde_json::from_value(serde_json::to_value(&loaded)?)?;
        assert_eq!(again, loaded);
        Ok(())
    }
}
