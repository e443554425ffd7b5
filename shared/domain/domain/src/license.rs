//! The Elasticsearch license a deployment's cluster runs, as the plan that
//! installed or started it found it: shown in the deployment's view, and
//! what the health check expects to find on the cluster.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The license type a new cluster runs until a plan installs another:
/// Elasticsearch's self-generated basic license, which never expires.
pub const BASIC: &str = "basic";

/// The license on a deployment's cluster, as a plan recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClusterLicense {
    /// `basic`, `trial`, `enterprise`, … as `GET _license` names it.
    #[serde(rename = "type")]
    #[schema(example = "trial")]
    pub license_type: String,
    /// When it ends; absent for a license that never does (basic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<DateTime<Utc>>,
}

impl ClusterLicense {
    /// What `GET _license` reports of the license (its `license` object).
    pub fn from_reported(license: &serde_json::Value) -> Option<ClusterLicense> {
        let license_type = license.get("type")?.as_str()?.to_string();
        let expiry = license
            .get("expiry_date_in_millis")
            .and_then(serde_json::Value::as_i64)
            .and_then(DateTime::<Utc>::from_timestamp_millis);
        Some(ClusterLicense {
            license_type,
            expiry,
        })
    }

    /// Whether Elasticsearch serves searchable snapshots on it (8.x: the
    /// enterprise license, or a trial), while it has not expired.
    pub fn allows_searchable_snapshots(&self, now: DateTime<Utc>) -> bool {
        matches!(self.license_type.as_str(), "enterprise" | "trial")
            && self.expiry.is_none_or(|expiry| expiry > now)
    }

    /// What the view says of it beside its type and expiry.
    pub fn warning(&self) -> Option<String> {
        (self.license_type == "trial").then(|| {
            let when = self
                .expiry
                .map(|e| e.format("%Y-%m-%d %H:%M UTC").to_string())
                .unwrap_or_else(|| "after 30 days".to_string());
            format!(
                "the cluster runs Elasticsearch's trial license, which ends {when}: it then falls back to basic, \
                 and its mounted (searchable snapshot) indices can no longer be searched"
            )
        })
    }
}

/// The license in a deployment's view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct LicenseView {
    #[serde(flatten)]
    pub license: ClusterLicense,
    /// What happens when it ends, for a trial.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl From<ClusterLicense> for LicenseView {
    fn from(license: ClusterLicense) -> LicenseView {
        LicenseView {
            warning: license.warning(),
            license,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn searchable_snapshots_need_an_enterprise_license_or_a_trial_in_force() {
        let now = Utc::now();
        let reported = |t: &str, expiry: Option<i64>| {
            let mut l = json!({"status": "active", "type": t});
            if let Some(e) = expiry {
                l["expiry_date_in_millis"] = json!(e);
            }
            ClusterLicense::from_reported(&l)
        };
        let later = (now + chrono::Duration::days(3)).timestamp_millis();
        let earlier = (now - chrono::Duration::days(3)).timestamp_millis();
        for (t, expiry, allows) in [
            ("basic", None, false),
            ("platinum", Some(later), false),
            ("gold", Some(later), false),
            ("enterprise", Some(later), true),
            ("trial", Some(later), true),
            ("trial", Some(earlier), false),
            ("enterprise", Some(earlier), false),
        ] {
            let license = reported(t, expiry).expect("a license");
            assert_eq!(
                license.allows_searchable_snapshots(now),
                allows,
                "{t} {expiry:?}"
            );
        }
        assert!(ClusterLicense::from_reported(&json!({"status": "active"})).is_none());
        let trial = reported("trial", Some(later)).expect("a trial");
        assert!(trial.warning().is_some_and(|w| w.contains("trial")));
        assert!(
            reported("enterprise", Some(later))
                .and_then(|l| l.warning())
                .is_none()
        );
    }
}
