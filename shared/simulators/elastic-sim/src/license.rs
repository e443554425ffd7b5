//! The licensing APIs: `GET _license`, installing one (`PUT|POST
//! _license`), `DELETE _license`, `POST _license/start_basic` and
//! `POST _license/start_trial`, answered as Elasticsearch 8 answers them.
//! A new cluster runs the self-generated `basic` license. The simulator
//! checks no signature: an installed license is taken as sent.

use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::state::Sim;
use crate::util::{iso_millis, new_uuid, now_millis};
use serde_json::{Value, json};
use std::sync::PoisonError;

/// What `GET _license` reports (and the data path keeps).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct License {
    pub uid: String,
    pub license_type: String,
    pub issued_to: String,
    pub issuer: String,
    pub issue_date_in_millis: i64,
    pub expiry_date_in_millis: Option<i64>,
}

/// A year-long trial, or a basic license that never expires.
const TRIAL_MILLIS: i64 = 30 * 24 * 3600 * 1000;

impl License {
    pub fn self_generated(license_type: &str) -> License {
        let now = now_millis();
        License {
            uid: new_uuid(),
            license_type: license_type.to_string(),
            issued_to: "elasticsearch".into(),
            issuer: "elasticsearch".into(),
            issue_date_in_millis: now,
            expiry_date_in_millis: (license_type == "trial").then_some(now + TRIAL_MILLIS),
        }
    }

    fn view(&self) -> Value {
        let mut license = json!({
            "status": "active",
            "uid": self.uid,
            "type": self.license_type,
            "issue_date": iso_millis(self.issue_date_in_millis),
            "issue_date_in_millis": self.issue_date_in_millis,
            "max_nodes": 1000,
            "max_resource_units": null,
            "issued_to": self.issued_to,
            "issuer": self.issuer,
            "start_date_in_millis": -1,
        });
        if let Some(expiry) = self.expiry_date_in_millis {
            license["expiry_date"] = json!(iso_millis(expiry));
            license["expiry_date_in_millis"] = json!(expiry);
        }
        license
    }
}

fn lock(sim: &Sim) -> std::sync::MutexGuard<'_, License> {
    sim.license.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `GET _license`.
pub fn get(sim: &Sim) -> ApiResult {
    Ok(Reply::ok(json!({ "license": lock(sim).view() })))
}

/// `PUT|POST _license` with `{"license": {...}}` (or `{"licenses": [...]}`).
pub fn put(sim: &Sim, req: &Req) -> ApiResult {
    let body = req.json()?;
    let sent = body
        .get("license")
        .or_else(|| body.get("licenses").and_then(|l| l.get(0)))
        .and_then(Value::as_object)
        .ok_or_else(|| {
            ApiError::illegal_argument("Failed to parse license: no license found in the request")
        })?;
    let text = |k: &str| sent.get(k).and_then(Value::as_str).map(str::to_string);
    let Some(license_type) = text("type") else {
        return Err(ApiError::illegal_argument(
            "Failed to parse license: [license] type is required",
        ));
    };
    let now = now_millis();
    *lock(sim) = License {
        uid: text("uid").unwrap_or_else(new_uuid),
        license_type,
        issued_to: text("issued_to").unwrap_or_else(|| "tenant".into()),
        issuer: text("issuer").unwrap_or_else(|| "elasticsearch".into()),
        issue_date_in_millis: sent
            .get("issue_date_in_millis")
            .and_then(Value::as_i64)
            .unwrap_or(now),
        expiry_date_in_millis: sent.get("expiry_date_in_millis").and_then(Value::as_i64),
    };
    Ok(Reply::ok(
        json!({ "acknowledged": true, "license_status": "valid" }),
    ))
}

/// `DELETE _license`: back to the self-generated basic license.
pub fn delete(sim: &Sim) -> ApiResult {
    *lock(sim) = License::self_generated("basic");
    Ok(Reply::acknowledged())
}

/// `POST _license/start_basic` and `POST _license/start_trial`; like
/// Elasticsearch, they need `acknowledge=true` to change anything.
pub fn start(sim: &Sim, req: &Req, license_type: &str) -> ApiResult {
    let acknowledged = req.param("acknowledge").is_some_and(|v| v == "true");
    let mut current = lock(sim);
    if !acknowledged {
        return Ok(Reply::ok(json!({
            "acknowledged": false,
            "basic_was_started": false,
            "trial_was_started": false,
            "error_message": "Operation failed: Needs acknowledgement.",
        })));
    }
    if current.license_type == license_type {
        return Ok(Reply::ok(json!({
            "acknowledged": true,
            "basic_was_started": false,
            "trial_was_started": false,
            "error_message": format!("Operation failed: Current license is {license_type}."),
        })));
    }
    *current = License::self_generated(license_type);
    Ok(Reply::ok(json!({
        "acknowledged": true,
        "basic_was_started": license_type == "basic",
        "trial_was_started": license_type == "trial",
    })))
}
