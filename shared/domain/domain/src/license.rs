//! Licenses: the Elasticsearch license a deployment's cluster runs, as the
//! plan that installed or started it found it (shown in the deployment's
//! view, and what the health check expects to find on the cluster); and an
//! organization's platform license, which the plans install on every
//! cluster of the organization.

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
    /// The license's uid: the platform license's once a plan installed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl ClusterLicense {
    /// What `GET _license` reports of the license (its `license` object).
    pub fn from_reported(license: &serde_json::Value) -> Option<ClusterLicense> {
        let license_type = license.get("type")?.as_str()?.to_string();
        let expiry = license
            .get("expiry_date_in_millis")
            .and_then(serde_json::Value::as_i64)
            .and_then(DateTime::<Utc>::from_timestamp_millis);
        let uid = license
            .get("uid")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string);
        Some(ClusterLicense {
            license_type,
            expiry,
            uid,
        })
    }

    /// Whether Elasticsearch serves searchable snapshots on it (8.x: the
    /// enterprise license, or a trial), while it has not expired.
    pub fn allows_searchable_snapshots(&self, now: DateTime<Utc>) -> bool {
        matches!(self.license_type.as_str(), "enterprise" | "trial")
            && self.expiry.is_none_or(|expiry| expiry > now)
    }

    /// That it ends within [`EXPIRY_WARNING_DAYS`], or has ended: what
    /// the health check warns of, for any license with an end.
    pub fn lapse_warning(&self, now: DateTime<Utc>) -> Option<String> {
        let expiry = self.expiry?;
        let left = expiry - now;
        if left > chrono::Duration::days(EXPIRY_WARNING_DAYS) {
            return None;
        }
        let when = expiry.format("%Y-%m-%d %H:%M UTC");
        let what = if self.license_type == "trial" {
            "Elasticsearch's trial".to_string()
        } else {
            format!("the {} license", self.license_type)
        };
        Some(if left <= chrono::Duration::zero() {
            format!(
                "the cluster's license ({what}) expired {when}: Elasticsearch refuses its licensed features \
                 (searchable snapshots, and on a secured cluster its health and stats) until another is installed"
            )
        } else {
            format!(
                "the cluster's license ({what}) ends {when}, in {} days: {}",
                left.num_days(),
                if self.license_type == "trial" {
                    "it then falls back to basic, and mounted (searchable snapshot) indices can no longer be searched; upload an enterprise platform license (PUT /api/v1/platform/license) before then"
                } else {
                    "upload a new platform license (PUT /api/v1/platform/license) before then"
                }
            )
        })
    }

    /// What the view says of it beside its type and expiry: that it ends
    /// soon (see [`ClusterLicense::lapse_warning`]), or, for a trial, what
    /// happens when it ends.
    pub fn warning(&self, now: DateTime<Utc>) -> Option<String> {
        if let Some(lapse) = self.lapse_warning(now) {
            return Some(lapse);
        }
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

/// How close to its end a license is warned of, in the view and the health.
pub const EXPIRY_WARNING_DAYS: i64 = 14;

/// The license in a deployment's view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct LicenseView {
    #[serde(flatten)]
    pub license: ClusterLicense,
    /// What happens when it ends, for a trial.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl LicenseView {
    pub fn new(license: ClusterLicense, now: DateTime<Utc>) -> LicenseView {
        LicenseView {
            warning: license.warning(now),
            license,
        }
    }
}

/// The license types Elasticsearch installs from a document, the ones a
/// platform license may have (basic is self-generated, never uploaded).
pub const UPLOADABLE_TYPES: [&str; 6] = [
    "standard",
    "gold",
    "silver",
    "platinum",
    "enterprise",
    "trial",
];

/// An organization's platform license as uploaded, in ECE's shape
/// (`PUT /api/v1/platform/license` with `{"license": {...}}`): the fields
/// of the Elasticsearch license that the plans install on every cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LicenseDocument {
    /// Unique identifier of the license.
    #[schema(
        example = "893361dc-9749-4997-93cb-802e3d7fa4a8",
        min_length = 1,
        max_length = 200
    )]
    pub uid: String,
    /// `enterprise`, `platinum`, `gold`, `standard`, `silver` or `trial`.
    #[serde(rename = "type")]
    #[schema(
        example = "enterprise",
        pattern = "^(standard|gold|silver|platinum|enterprise|trial)$"
    )]
    pub license_type: String,
    /// Who issued it.
    #[schema(example = "elasticsearch", min_length = 1, max_length = 500)]
    pub issuer: String,
    /// Who it was issued to.
    #[schema(example = "Example Corp", min_length = 1, max_length = 500)]
    pub issued_to: String,
    /// When it was issued, in milliseconds since the Unix epoch.
    #[schema(minimum = 0)]
    pub issue_date_in_millis: i64,
    /// When it becomes valid, in milliseconds since the Unix epoch.
    #[schema(minimum = 0)]
    pub start_date_in_millis: i64,
    /// When it expires, in milliseconds since the Unix epoch.
    #[schema(minimum = 0)]
    pub expiry_date_in_millis: i64,
    /// Elastic's signature. Kept to install the license; never shown back.
    #[schema(min_length = 1, max_length = 16384)]
    pub signature: String,
    /// The most nodes the license covers (every type but enterprise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 2147483647)]
    pub max_nodes: Option<i64>,
    /// The most resource units it covers (enterprise only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 2147483647)]
    pub max_resource_units: Option<i64>,
    /// ECE's instance limit, kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 2147483647)]
    pub max_instances: Option<i64>,
    /// The license format's version, kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// The subscription it belongs to, kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_type: Option<String>,
}

/// A field of an uploaded license that Elasticsearch would refuse, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LicenseFault {
    /// The field's path in the request, `license.expiry_date_in_millis`.
    pub field: &'static str,
    pub message: String,
}

fn fault(field: &'static str, message: impl Into<String>) -> LicenseFault {
    LicenseFault {
        field,
        message: message.into(),
    }
}

impl LicenseDocument {
    /// The rules Elasticsearch checks before it installs a license (all but
    /// the signature, which only Elastic's key verifies), checked when it
    /// is uploaded, so that a license every cluster would refuse is refused
    /// once, here, and no plan starts for it.
    pub fn check(&self, now: DateTime<Utc>) -> Result<(), LicenseFault> {
        let text = |field: &'static str, value: &str, max: usize| {
            if value.trim().is_empty() {
                Err(fault(field, "must not be empty"))
            } else if value.chars().count() > max || value.contains(char::is_control) {
                Err(fault(
                    field,
                    format!("must be at most {max} characters, without control characters"),
                ))
            } else {
                Ok(())
            }
        };
        text("license.uid", &self.uid, 200)?;
        text("license.issuer", &self.issuer, 500)?;
        text("license.issued_to", &self.issued_to, 500)?;
        text("license.signature", &self.signature, 16 * 1024)?;
        if !UPLOADABLE_TYPES.contains(&self.license_type.as_str()) {
            return Err(fault(
                "license.type",
                format!(
                    "'{}' is not a license type Elasticsearch installs; one of {}",
                    self.license_type,
                    UPLOADABLE_TYPES.join(", ")
                ),
            ));
        }
        let now = now.timestamp_millis();
        for (field, value) in [
            ("license.issue_date_in_millis", self.issue_date_in_millis),
            ("license.start_date_in_millis", self.start_date_in_millis),
            ("license.expiry_date_in_millis", self.expiry_date_in_millis),
        ] {
            if DateTime::<Utc>::from_timestamp_millis(value).is_none() || value < 0 {
                return Err(fault(
                    field,
                    "must be a time in milliseconds since the Unix epoch",
                ));
            }
        }
        // Elasticsearch calls a license issued or starting in the future invalid.
        if self.issue_date_in_millis > now {
            return Err(fault("license.issue_date_in_millis", "is in the future"));
        }
        if self.start_date_in_millis > now {
            return Err(fault("license.start_date_in_millis", "is in the future"));
        }
        if self.expiry_date_in_millis <= now {
            return Err(fault(
                "license.expiry_date_in_millis",
                "the license has expired; Elasticsearch installs no expired license",
            ));
        }
        if self.expiry_date_in_millis <= self.issue_date_in_millis {
            return Err(fault(
                "license.expiry_date_in_millis",
                "must be after issue_date_in_millis",
            ));
        }
        let positive = |field: &'static str, value: Option<i64>| match value {
            Some(n) if n <= 0 || n > i64::from(i32::MAX) => {
                Err(fault(field, "must be a positive whole number"))
            }
            _ => Ok(()),
        };
        positive("license.max_nodes", self.max_nodes)?;
        positive("license.max_resource_units", self.max_resource_units)?;
        positive("license.max_instances", self.max_instances)?;
        if self.license_type == "enterprise" {
            if self.max_resource_units.is_none() {
                return Err(fault(
                    "license.max_resource_units",
                    "an enterprise license must set max_resource_units",
                ));
            }
            if self.max_nodes.is_some() {
                return Err(fault(
                    "license.max_nodes",
                    "an enterprise license may not set max_nodes",
                ));
            }
        } else {
            if self.max_nodes.is_none() {
                return Err(fault(
                    "license.max_nodes",
                    format!("a {} license must set max_nodes", self.license_type),
                ));
            }
            if self.max_resource_units.is_some() {
                return Err(fault(
                    "license.max_resource_units",
                    "only an enterprise license may set max_resource_units",
                ));
            }
        }
        Ok(())
    }

    /// The body of `PUT _license` that installs it on a cluster.
    pub fn install_body(&self) -> serde_json::Value {
        let mut license = serde_json::json!({
            "uid": self.uid,
            "type": self.license_type,
            "issue_date_in_millis": self.issue_date_in_millis,
            "expiry_date_in_millis": self.expiry_date_in_millis,
            "issued_to": self.issued_to,
            "issuer": self.issuer,
            "signature": self.signature,
            "start_date_in_millis": self.start_date_in_millis,
        });
        if let Some(n) = self.max_nodes {
            license["max_nodes"] = n.into();
        }
        if let Some(n) = self.max_resource_units {
            license["max_resource_units"] = n.into();
        }
        serde_json::json!({ "license": license })
    }

    pub fn expiry(&self) -> Option<DateTime<Utc>> {
        DateTime::<Utc>::from_timestamp_millis(self.expiry_date_in_millis)
    }

    /// What a cluster runs once it is installed.
    pub fn cluster_license(&self) -> ClusterLicense {
        ClusterLicense {
            license_type: self.license_type.clone(),
            expiry: self.expiry(),
            uid: Some(self.uid.clone()),
        }
    }
}

/// The request body of `PUT /api/v1/platform/license` (ECE's `LicenseObject`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LicenseObject {
    pub license: LicenseDocument,
}

/// An organization's platform license, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlatformLicense {
    pub org: String,
    pub license: LicenseDocument,
    pub uploaded: DateTime<Utc>,
    /// The subject of the token that uploaded it.
    pub uploaded_by: String,
}

/// What `GET /api/v1/platform/license` shows: the license without its
/// signature, and what it allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct LicenseInfo {
    pub uid: String,
    #[serde(rename = "type")]
    #[schema(example = "enterprise")]
    pub license_type: String,
    pub issuer: String,
    pub issued_to: String,
    pub issue_date_in_millis: i64,
    pub start_date_in_millis: i64,
    pub expiry_date_in_millis: i64,
    /// The expiry as an RFC 3339 time.
    pub expiry: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_resource_units: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_instances: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_type: Option<String>,
    /// `active` or `expired`, by the clock now.
    #[schema(example = "active")]
    pub status: String,
    /// Whether mount clones may run on it (Elasticsearch serves searchable
    /// snapshots on an enterprise license or a trial).
    pub allows_searchable_snapshots: bool,
    pub uploaded: DateTime<Utc>,
    pub uploaded_by: String,
    /// What to know about it now: that it ends within 14 days, or has.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl LicenseInfo {
    pub fn new(stored: &PlatformLicense, now: DateTime<Utc>) -> LicenseInfo {
        let l = &stored.license;
        let cluster = l.cluster_license();
        let active = cluster.expiry.is_some_and(|e| e > now);
        LicenseInfo {
            uid: l.uid.clone(),
            license_type: l.license_type.clone(),
            issuer: l.issuer.clone(),
            issued_to: l.issued_to.clone(),
            issue_date_in_millis: l.issue_date_in_millis,
            start_date_in_millis: l.start_date_in_millis,
            expiry_date_in_millis: l.expiry_date_in_millis,
            expiry: cluster.expiry,
            max_nodes: l.max_nodes,
            max_resource_units: l.max_resource_units,
            max_instances: l.max_instances,
            version: l.version,
            subscription_type: l.subscription_type.clone(),
            status: if active { "active" } else { "expired" }.to_string(),
            allows_searchable_snapshots: cluster.allows_searchable_snapshots(now),
            uploaded: stored.uploaded,
            uploaded_by: stored.uploaded_by.clone(),
            warnings: platform_lapse(&cluster, now).into_iter().collect(),
        }
    }
}

/// That the platform license ends within [`EXPIRY_WARNING_DAYS`], or has.
fn platform_lapse(license: &ClusterLicense, now: DateTime<Utc>) -> Option<String> {
    let expiry = license.expiry?;
    let left = expiry - now;
    let when = expiry.format("%Y-%m-%d %H:%M UTC");
    if left <= chrono::Duration::zero() {
        Some(format!(
            "the platform license expired {when}: no cluster gets it any more, and mount clones need a trial; \
             upload a new one (PUT /api/v1/platform/license)"
        ))
    } else if left <= chrono::Duration::days(EXPIRY_WARNING_DAYS) {
        Some(format!(
            "the platform license ends {when}, in {} days: upload a new one (PUT /api/v1/platform/license) before then",
            left.num_days()
        ))
    } else {
        None
    }
}

/// What a plan's `license` step does to a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LicenseAction {
    /// The cluster runs the license it should (the platform license, or
    /// one that serves a mount clone): it is the one in force. The reason
    /// is for the plan's log.
    InForce(String),
    /// No license is Floe's to put in force: the cluster is left as it is,
    /// and the license Floe's plans put in force before stays the one
    /// expected of it.
    Keep(String),
    /// Install the platform license (`PUT _license?acknowledge=true`).
    Install,
    /// Start Elasticsearch's trial (`POST _license/start_trial`).
    StartTrial,
    /// The cluster needs searchable snapshots and nothing gives them.
    Refuse(String),
}

/// What a cluster that runs `current` is to run, given the organization's
/// platform license, whether the deployment mounts searchable snapshots
/// (a mount clone) and whether its clone asked for the trial.
///
/// The platform license wins, except over a license that serves a mount
/// clone's mounted indices when it would not (a platinum platform license
/// over a clone's trial): installing it would make them unsearchable.
pub fn decide_license(
    platform: Option<&LicenseDocument>,
    current: &ClusterLicense,
    mounts: bool,
    trial_asked: bool,
    now: DateTime<Utc>,
) -> LicenseAction {
    let platform = platform.filter(|p| p.expiry().is_some_and(|e| e > now));
    if let Some(p) = platform {
        if current.uid.as_deref() == Some(p.uid.as_str()) {
            return LicenseAction::InForce(format!(
                "the cluster runs the platform license {} already",
                p.uid
            ));
        }
        let serves = p.cluster_license().allows_searchable_snapshots(now);
        if !mounts || serves {
            return LicenseAction::Install;
        }
    }
    if !mounts {
        return LicenseAction::Keep(format!(
            "no platform license is in force; the cluster keeps the {} license",
            current.license_type
        ));
    }
    if current.allows_searchable_snapshots(now) {
        return LicenseAction::InForce(format!(
            "the cluster runs the {} license, which allows searchable snapshots",
            current.license_type
        ));
    }
    if trial_asked {
        return LicenseAction::StartTrial;
    }
    LicenseAction::Refuse(match platform {
        Some(p) => format!(
            "the platform license is {}, which does not allow searchable snapshots (Elasticsearch needs enterprise, or a trial), \
             the cluster runs {}, and this clone asked for no trial",
            p.license_type, current.license_type
        ),
        None => format!(
            "the cluster runs the {} license, which does not allow searchable snapshots \
             (Elasticsearch needs enterprise, or a trial); there is no platform license in force, and this clone asked for no trial",
            current.license_type
        ),
    })
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
        assert!(trial.warning(now).is_some_and(|w| w.contains("trial")));
        assert!(
            reported("enterprise", Some(later))
                .and_then(|l| l.warning(now))
                .is_some_and(|w| w.contains("the enterprise license) ends")),
            "an enterprise license ending within 14 days is warned of"
        );
        let far = (now + chrono::Duration::days(60)).timestamp_millis();
        assert!(
            reported("enterprise", Some(far))
                .and_then(|l| l.warning(now))
                .is_none()
        );
    }
    fn document(license_type: &str) -> LicenseDocument {
        let now = Utc::now().timestamp_millis();
        let day = 86_400_000;
        LicenseDocument {
            uid: "u-1".into(),
            license_type: license_type.into(),
            issuer: "elasticsearch".into(),
            issued_to: "Example Corp".into(),
            issue_date_in_millis: now - day,
            start_date_in_millis: now - day,
            expiry_date_in_millis: now + 365 * day,
            signature: "AAAA".into(),
            max_nodes: (license_type != "enterprise").then_some(10),
            max_resource_units: (license_type == "enterprise").then_some(5),
            max_instances: None,
            version: None,
            subscription_type: None,
        }
    }

    /// An upload breaking a rule Elasticsearch checks is refused naming
    /// the field; the signature is the one rule only Elastic can check.
    #[test]
    fn an_uploaded_license_is_checked_as_elasticsearch_would() {
        let now = Utc::now();
        for t in UPLOADABLE_TYPES {
            assert_eq!(document(t).check(now), Ok(()), "{t}");
        }
        let field = |d: LicenseDocument| d.check(now).err().map(|f| f.field);
        let mut d = document("enterprise");
        d.license_type = "basic".into();
        assert_eq!(field(d), Some("license.type"));
        let mut d = document("enterprise");
        d.expiry_date_in_millis = now.timestamp_millis() - 1;
        assert_eq!(field(d), Some("license.expiry_date_in_millis"));
        let mut d = document("platinum");
        d.max_nodes = None;
        assert_eq!(field(d), Some("license.max_nodes"));
        let mut d = document("enterprise");
        d.max_nodes = Some(3);
        assert_eq!(field(d), Some("license.max_nodes"));
        let mut d = document("gold");
        d.issue_date_in_millis = now.timestamp_millis() + 60_000;
        assert_eq!(field(d), Some("license.issue_date_in_millis"));
        let mut d = document("gold");
        d.uid = " ".into();
        assert_eq!(field(d), Some("license.uid"));
        let mut d = document("gold");
        d.expiry_date_in_millis = i64::MAX;
        assert_eq!(field(d), Some("license.expiry_date_in_millis"));

        let body = document("enterprise").install_body();
        assert_eq!(body["license"]["max_resource_units"], 5);
        assert!(body["license"].get("max_nodes").is_none());
        assert_eq!(body["license"]["signature"], "AAAA");
    }

    /// The platform license's own view warns of its end, in its own words.
    #[test]
    fn the_platform_license_view_warns_of_its_end() {
        let now = Utc::now();
        let info = |days: i64| {
            let mut d = document("enterprise");
            d.expiry_date_in_millis = (now + chrono::Duration::days(days)).timestamp_millis();
            let stored = PlatformLicense {
                org: "acme".into(),
                license: d,
                uploaded: now,
                uploaded_by: "admin".into(),
            };
            LicenseInfo::new(&stored, now)
        };
        assert!(info(60).warnings.is_empty());
        let soon = info(5);
        assert_eq!(soon.status, "active");
        assert!(
            soon.warnings[0].starts_with("the platform license ends"),
            "{:?}",
            soon.warnings
        );
        let gone = info(-1);
        assert_eq!(gone.status, "expired");
        assert!(!gone.allows_searchable_snapshots);
        assert!(
            gone.warnings[0].starts_with("the platform license expired"),
            "{:?}",
            gone.warnings
        );
    }

    /// What the license step does, for every case that matters.
    #[test]
    fn the_platform_license_wins_unless_it_would_unmount_a_clone() {
        let now = Utc::now();
        let later = Some(now + chrono::Duration::days(20));
        let cluster = |t: &str, uid: Option<&str>| ClusterLicense {
            license_type: t.into(),
            expiry: (t != "basic").then_some(later).flatten(),
            uid: uid.map(str::to_string),
        };
        let enterprise = document("enterprise");
        let platinum = document("platinum");
        let mut expired = document("enterprise");
        expired.expiry_date_in_millis = now.timestamp_millis() - 1;
        use LicenseAction::*;
        let keep = |a: LicenseAction| matches!(a, Keep(_));
        let in_force = |a: LicenseAction| matches!(a, InForce(_));
        let refuse = |a: LicenseAction| matches!(a, Refuse(_));
        // No platform license: a plain deployment keeps basic; a mount
        // clone needs the trial it asked for.
        assert!(keep(decide_license(
            None,
            &cluster("basic", None),
            false,
            false,
            now
        )));
        assert_eq!(
            decide_license(None, &cluster("basic", None), true, true, now),
            StartTrial
        );
        assert!(refuse(decide_license(
            None,
            &cluster("basic", None),
            true,
            false,
            now
        )));
        assert!(in_force(decide_license(
            None,
            &cluster("trial", None),
            true,
            false,
            now
        )));
        // A platform license is installed on every cluster, once.
        assert_eq!(
            decide_license(
                Some(&enterprise),
                &cluster("basic", None),
                false,
                false,
                now
            ),
            Install
        );
        assert_eq!(
            decide_license(Some(&enterprise), &cluster("basic", None), true, false, now),
            Install
        );
        assert!(in_force(decide_license(
            Some(&enterprise),
            &cluster("enterprise", Some("u-1")),
            true,
            false,
            now
        )));
        assert_eq!(
            decide_license(Some(&platinum), &cluster("trial", None), false, false, now),
            Install
        );
        // ... but not over a clone's trial it could not replace.
        assert!(in_force(decide_license(
            Some(&platinum),
            &cluster("trial", None),
            true,
            false,
            now
        )));
        assert_eq!(
            decide_license(Some(&platinum), &cluster("basic", None), true, true, now),
            StartTrial
        );
        assert!(refuse(decide_license(
            Some(&platinum),
            &cluster("basic", None),
            true,
            false,
            now
        )));
        // An expired platform license counts as none.
        assert!(keep(decide_license(
            Some(&expired),
            &cluster("basic", None),
            false,
            false,
            now
        )));
    }
}
