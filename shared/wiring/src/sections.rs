//! The typed sections, and each function's configuration made of them.

use crate::env::{ConfigError, Env, invalid};
use floe_auth::JwksCacheSettings;
use std::path::PathBuf;
use std::time::Duration;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_ISSUER: &str = "floe-local";
pub const DEFAULT_AUDIENCE: &str = "floe-api";
/// Where the nodes' parameters live unless `FLOE_PARAMETER_PREFIX` says.
pub const DEFAULT_PARAMETER_PREFIX: &str = "/floe";
/// Lambda stops a function after 15 minutes; waiting longer than this for
/// one snapshot leaves no time to record it and apply retention.
pub const MAX_SNAPSHOT_WAIT: Duration = Duration::from_secs(13 * 60);
pub const DEFAULT_SNAPSHOT_WAIT: Duration = Duration::from_secs(10 * 60);
/// The shortest minimum length of an HS256 secret.
pub const MIN_SECRET_LEN: usize = 32;

/// `FLOE_DATA_DIR`: local mode's files (the SQLite database, the JWT
/// secret, the key that seals repository credentials).
pub fn data_dir(env: &Env) -> PathBuf {
    env.get("FLOE_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".floe"))
}

/// Where the records are (`FLOE_STORE`, `FLOE_CREATE_TABLE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    Sqlite(PathBuf),
    Dynamo {
        table: String,
        /// Create the table when missing (tooling and tests; production's
        /// table comes from the stack).
        create: bool,
    },
}

/// A DynamoDB table name: 3 to 255 of `[A-Za-z0-9_.-]`.
pub fn is_table_name(name: &str) -> bool {
    (3..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

impl StoreChoice {
    /// Local mode: SQLite under the data folder unless `FLOE_STORE` says.
    pub fn read(env: &Env) -> Result<StoreChoice, ConfigError> {
        match env.get("FLOE_STORE") {
            None => Ok(StoreChoice::Sqlite(data_dir(env).join("floe.db"))),
            Some(s) => StoreChoice::parse(env, &s),
        }
    }

    /// The functions on Lambda: the stack's DynamoDB table, always. SQLite
    /// has no place there: a file in one Lambda environment's /tmp is shared
    /// with no other environment.
    pub fn read_table(env: &Env) -> Result<StoreChoice, ConfigError> {
        let s = env.required("FLOE_STORE", "dynamodb://TABLE")?;
        match StoreChoice::parse(env, &s)? {
            StoreChoice::Sqlite(_) => Err(invalid(
                "FLOE_STORE",
                "must be dynamodb://TABLE (the functions share one table)",
            )),
            dynamo => Ok(dynamo),
        }
    }

    fn parse(env: &Env, s: &str) -> Result<StoreChoice, ConfigError> {
        if let Some(path) = s.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(invalid(
                    "FLOE_STORE",
                    "sqlite:// needs a file path, e.g. sqlite://.floe/floe.db",
                ));
            }
            Ok(StoreChoice::Sqlite(PathBuf::from(path)))
        } else if let Some(table) = s.strip_prefix("dynamodb://") {
            if !is_table_name(table) {
                return Err(invalid(
                    "FLOE_STORE",
                    "dynamodb://TABLE needs a DynamoDB table name",
                ));
            }
            Ok(StoreChoice::Dynamo {
                table: table.to_string(),
                create: env.flag("FLOE_CREATE_TABLE")?,
            })
        } else {
            Err(invalid(
                "FLOE_STORE",
                "must be sqlite://PATH or dynamodb://TABLE",
            ))
        }
    }
}

/// Which keys verify tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenKeys {
    /// HS256 with this secret (`FLOE_JWT_SECRET`)…
    Secret(String),
    /// …or, when unset, with the one generated into this file (local mode).
    SecretFile(PathBuf),
    /// RS256/ES256 against a JWKS fetched from this URL (`FLOE_JWKS_URL`),
    /// cached and refetched as `cache` says.
    JwksUrl {
        url: String,
        cache: JwksCacheSettings,
    },
    /// RS256/ES256 against a JWKS file (`FLOE_JWKS_FILE`).
    JwksFile(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthConfig {
    pub keys: TokenKeys,
    /// `FLOE_JWT_ISSUER`, `FLOE_JWT_AUDIENCE`.
    pub issuer: String,
    pub audience: String,
}

impl AuthConfig {
    pub fn read(env: &Env) -> Result<AuthConfig, ConfigError> {
        let keys = if let Some(url) = env.get("FLOE_JWKS_URL") {
            if !url.starts_with("https://") && !url.starts_with("http://") {
                return Err(invalid("FLOE_JWKS_URL", "must be an http(s) URL"));
            }
            TokenKeys::JwksUrl {
                url,
                cache: jwks_cache(env)?,
            }
        } else if let Some(file) = env.get("FLOE_JWKS_FILE") {
            TokenKeys::JwksFile(PathBuf::from(file))
        } else {
            match env.get("FLOE_JWT_SECRET") {
                Some(s) if s.len() < MIN_SECRET_LEN => {
                    return Err(invalid(
                        "FLOE_JWT_SECRET",
                        format!("must be at least {MIN_SECRET_LEN} bytes"),
                    ));
                }
                Some(s) => TokenKeys::Secret(s),
                None => TokenKeys::SecretFile(data_dir(env).join("jwt.secret")),
            }
        };
        let issuer = env.get("FLOE_JWT_ISSUER");
        let audience = env.get("FLOE_JWT_AUDIENCE");
        if matches!(keys, TokenKeys::JwksUrl { .. } | TokenKeys::JwksFile(_))
            && (issuer.is_none() || audience.is_none())
        {
            // With a real identity provider a default issuer would accept
            // nothing (or, worse, the wrong tokens): make the operator say.
            return Err(invalid(
                "FLOE_JWT_ISSUER",
                "FLOE_JWT_ISSUER and FLOE_JWT_AUDIENCE must be set with a JWKS",
            ));
        }
        Ok(AuthConfig {
            keys,
            issuer: issuer.unwrap_or_else(|| DEFAULT_ISSUER.into()),
            audience: audience.unwrap_or_else(|| DEFAULT_AUDIENCE.into()),
        })
    }

    pub fn uses_jwks(&self) -> bool {
        matches!(
            self.keys,
            TokenKeys::JwksUrl { .. } | TokenKeys::JwksFile(_)
        )
    }
}

/// `FLOE_JWKS_TTL_SECS`, `FLOE_JWKS_REFETCH_SECS`: how long a fetched JWKS
/// is trusted when its response sets no `max-age`, and the least time
/// between two fetches.
fn jwks_cache(env: &Env) -> Result<JwksCacheSettings, ConfigError> {
    let defaults = JwksCacheSettings::default();
    Ok(JwksCacheSettings {
        default_ttl: seconds_within(
            env,
            "FLOE_JWKS_TTL_SECS",
            defaults.default_ttl,
            JwksCacheSettings::MIN_TTL,
            JwksCacheSettings::MAX_TTL,
        )?,
        refetch_interval: seconds_within(
            env,
            "FLOE_JWKS_REFETCH_SECS",
            defaults.refetch_interval,
            // Zero would let every token with a made-up kid cost a fetch.
            Duration::from_secs(1),
            JwksCacheSettings::MAX_REFETCH_INTERVAL,
        )?,
    })
}

/// Whole seconds from `min` to `max`, or `default` when unset.
fn seconds_within(
    env: &Env,
    name: &'static str,
    default: Duration,
    min: Duration,
    max: Duration,
) -> Result<Duration, ConfigError> {
    let Some(raw) = env.get(name) else {
        return Ok(default);
    };
    match raw.parse::<u64>().map(Duration::from_secs) {
        Ok(d) if (min..=max).contains(&d) => Ok(d),
        _ => Err(invalid(
            name,
            format!(
                "must be whole seconds from {} to {}",
                min.as_secs(),
                max.as_secs()
            ),
        )),
    }
}

/// How repository credentials (and node secrets) are sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretsConfig {
    /// `FLOE_KMS_KEY_ID`: seal with this KMS key.
    pub kms_key_id: Option<String>,
    /// `FLOE_SECRET_KEY_FILE`: the local AES-256-GCM key (local mode; with
    /// KMS, still read when present so that values it sealed stay readable).
    pub key_file: PathBuf,
}

impl SecretsConfig {
    pub fn read(env: &Env) -> SecretsConfig {
        SecretsConfig {
            kms_key_id: env.get("FLOE_KMS_KEY_ID"),
            key_file: env
                .get("FLOE_SECRET_KEY_FILE")
                .map(PathBuf::from)
                .unwrap_or_else(|| data_dir(env).join("secrets.key")),
        }
    }
}

/// On Lambda the worker opens what the api sealed: that takes the stack's
/// KMS key (a key file of its own would open nothing), so it must be named.
fn kms_secrets(env: &Env) -> Result<SecretsConfig, ConfigError> {
    let secrets = SecretsConfig::read(env);
    if secrets.kms_key_id.is_none() {
        return Err(invalid(
            "FLOE_KMS_KEY_ID",
            "is required: the KMS key that seals repository credentials and node secrets",
        ));
    }
    Ok(secrets)
}

/// `FLOE_ALLOW_PRIVATE_ENDPOINTS`: repository endpoints may be private or
/// loopback addresses.
pub fn allow_private_endpoints(env: &Env) -> Result<bool, ConfigError> {
    env.flag("FLOE_ALLOW_PRIVATE_ENDPOINTS")
}

/// `FLOE_PARAMETER_PREFIX`: the SSM path under which each deployment's node
/// parameters live.
pub fn parameter_prefix(env: &Env) -> Result<String, ConfigError> {
    let prefix = env
        .get("FLOE_PARAMETER_PREFIX")
        .unwrap_or_else(|| DEFAULT_PARAMETER_PREFIX.to_string());
    if !prefix.starts_with('/') || prefix.contains(char::is_whitespace) {
        return Err(invalid(
            "FLOE_PARAMETER_PREFIX",
            "must be an SSM parameter path such as /floe",
        ));
    }
    Ok(prefix)
}

/// How the functions reach a node's HTTP port: `FLOE_ES_SCHEME` (`https`,
/// the default since Elasticsearch 8 secures HTTP, or `http`) and
/// `FLOE_ES_PORT` (9200).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeHttp {
    pub https: bool,
    pub port: u16,
}

impl NodeHttp {
    pub fn read(env: &Env) -> Result<NodeHttp, ConfigError> {
        let https = match env.get("FLOE_ES_SCHEME").as_deref() {
            None | Some("https") => true,
            Some("http") => false,
            Some(_) => return Err(invalid("FLOE_ES_SCHEME", "must be http or https")),
        };
        let port = match env.get("FLOE_ES_PORT") {
            None => 9200,
            Some(p) => match p.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => return Err(invalid("FLOE_ES_PORT", "must be a port number")),
            },
        };
        Ok(NodeHttp { https, port })
    }
}

/// `FLOE_QUEUE_URL`: the work queue.
pub fn queue_url(env: &Env) -> Result<Option<String>, ConfigError> {
    match env.get("FLOE_QUEUE_URL") {
        None => Ok(None),
        Some(url) if url.starts_with("https://") || url.starts_with("http://") => Ok(Some(url)),
        Some(_) => Err(invalid(
            "FLOE_QUEUE_URL",
            "must be the queue's URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)",
        )),
    }
}

/// How the worker launches nodes on EC2 (`FLOE_EC2_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ec2Settings {
    pub image_arm64: String,
    pub image_x86_64: String,
    /// One per zone.
    pub subnets: Vec<String>,
    pub security_groups: Vec<String>,
    /// Each deployment's own node role and instance profile.
    pub identity: NodeIdentitySettings,
    pub key_name: Option<String>,
}

impl Ec2Settings {
    pub fn read(env: &Env) -> Result<Ec2Settings, ConfigError> {
        let image = |name: &'static str| match env.get(name) {
            Some(id) if id.starts_with("ami-") => Ok(id),
            Some(id) => Err(invalid(
                name,
                format!("{id:?} is not an image id (ami-...)"),
            )),
            None => Err(invalid(
                name,
                "is required with FLOE_COMPUTE=ec2: an AMI id",
            )),
        };
        // One profile for every node could read every deployment's keys:
        // a setting that names one is refused rather than ignored, so that
        // no one believes it is in effect.
        if env.get("FLOE_EC2_INSTANCE_PROFILE").is_some() {
            return Err(invalid(
                "FLOE_EC2_INSTANCE_PROFILE",
                "is no longer read: each deployment's nodes get an instance profile of their own \
                 (FLOE_NODE_PERMISSIONS_BOUNDARY); remove it",
            ));
        }
        Ok(Ec2Settings {
            image_arm64: image("FLOE_EC2_IMAGE_ARM64")?,
            image_x86_64: image("FLOE_EC2_IMAGE_X86_64")?,
            subnets: id_list(
                env,
                "FLOE_EC2_SUBNETS",
                "subnet-",
                "subnet ids, one per zone",
            )?,
            security_groups: id_list(env, "FLOE_EC2_SECURITY_GROUPS", "sg-", "security group ids")?,
            identity: NodeIdentitySettings::read(env)?,
            key_name: env.get("FLOE_EC2_KEY_NAME"),
        })
    }
}

/// The IAM path of the node roles and instance profiles unless
/// `FLOE_NODE_IAM_PATH` says (the deploy template's grants name it).
pub const DEFAULT_NODE_IAM_PATH: &str = "/floe-nodes/";

/// What each deployment's node role is made with (`FLOE_NODE_*`): the
/// worker creates one role and instance profile per deployment, under
/// `path`, bounded by `permissions_boundary`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentitySettings {
    /// `FLOE_NODE_PERMISSIONS_BOUNDARY`: the ARN of the customer managed
    /// policy every node role is created with as its permissions boundary.
    pub permissions_boundary: String,
    /// The partition and account of that policy, which are the roles'
    /// (and the parameters') too.
    pub partition: String,
    pub account: String,
    /// `FLOE_NODE_IAM_PATH`: `/` at both ends.
    pub path: String,
    /// `FLOE_NODE_SNAPSHOT_BUCKETS`: the S3 buckets nodes may keep
    /// snapshots in with their own credentials (comma-separated names).
    pub snapshot_buckets: Vec<String>,
}

impl NodeIdentitySettings {
    pub fn read(env: &Env) -> Result<NodeIdentitySettings, ConfigError> {
        const BOUNDARY: &str = "FLOE_NODE_PERMISSIONS_BOUNDARY";
        let boundary = env.required(
            BOUNDARY,
            "with FLOE_COMPUTE=ec2: the ARN of the managed policy that bounds every node role \
             (arn:aws:iam::ACCOUNT:policy/NAME)",
        )?;
        let (partition, account) = policy_owner(&boundary).ok_or_else(|| {
            invalid(
                BOUNDARY,
                format!(
                    "{boundary:?} is not the ARN of a customer managed policy \
                     (arn:aws:iam::ACCOUNT:policy/NAME)"
                ),
            )
        })?;
        let path = env
            .get("FLOE_NODE_IAM_PATH")
            .unwrap_or_else(|| DEFAULT_NODE_IAM_PATH.to_string());
        let path_ok = path.len() > 2
            && path.len() <= 512
            && path.starts_with('/')
            && path.ends_with('/')
            && !path.contains("//")
            && path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'));
        if !path_ok {
            return Err(invalid(
                "FLOE_NODE_IAM_PATH",
                "must be an IAM path other than / with / at both ends, such as /floe-nodes/",
            ));
        }
        let snapshot_buckets: Vec<String> = env
            .get("FLOE_NODE_SNAPSHOT_BUCKETS")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if let Some(bad) = snapshot_buckets.iter().find(|b| !is_bucket_name(b)) {
            return Err(invalid(
                "FLOE_NODE_SNAPSHOT_BUCKETS",
                format!("{bad:?} is not an S3 bucket name"),
            ));
        }
        Ok(NodeIdentitySettings {
            permissions_boundary: boundary,
            partition,
            account,
            path,
            snapshot_buckets,
        })
    }
}

/// The partition and account of `arn:PARTITION:iam::ACCOUNT:policy/NAME`.
/// An AWS managed policy (account `aws`) is refused: the stack's own
/// boundary names this deployment's parameter prefix, none of AWS's does.
fn policy_owner(arn: &str) -> Option<(String, String)> {
    let mut parts = arn.splitn(6, ':');
    let (arn_word, partition, service, region, account, resource) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    let ok = arn_word == "arn"
        && partition.starts_with("aws")
        && service == "iam"
        && region.is_empty()
        && account.len() == 12
        && account.chars().all(|c| c.is_ascii_digit())
        && resource
            .strip_prefix("policy/")
            .is_some_and(|n| !n.is_empty());
    ok.then(|| (partition.to_string(), account.to_string()))
}

/// S3's rules for a bucket name, as far as a policy's resource needs: no
/// wildcard or path can hide in it.
fn is_bucket_name(name: &str) -> bool {
    (3..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A comma-separated list of ids that all start with `prefix`.
fn id_list(
    env: &Env,
    name: &'static str,
    prefix: &str,
    what: &str,
) -> Result<Vec<String>, ConfigError> {
    let ids: Vec<String> = env
        .get(name)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if ids.is_empty() {
        return Err(invalid(
            name,
            format!("is required: a comma-separated list of {what}"),
        ));
    }
    if let Some(bad) = ids.iter().find(|id| !id.starts_with(prefix)) {
        return Err(invalid(
            name,
            format!("{bad:?} is not {what} ({prefix}...)"),
        ));
    }
    Ok(ids)
}

/// Where the worker runs nodes (`FLOE_COMPUTE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComputeChoice {
    Ec2(Ec2Settings),
    /// Simulated instances and clusters: only in builds that carry the
    /// simulators (local mode, and the worker built for the emulator tests).
    Simulated(SimSettings),
}

impl ComputeChoice {
    pub fn read(env: &Env) -> Result<ComputeChoice, ConfigError> {
        match env.get("FLOE_COMPUTE").as_deref() {
            None | Some("ec2") => Ok(ComputeChoice::Ec2(Ec2Settings::read(env)?)),
            Some("simulated") => Ok(ComputeChoice::Simulated(SimSettings::read(env)?)),
            Some(_) => Err(invalid("FLOE_COMPUTE", "must be ec2 or simulated")),
        }
    }
}

/// How simulated instances behave (local mode, and the worker built for the
/// emulator tests): `FLOE_SIM_BOOT_DELAY_MS` and
/// `FLOE_SIM_TERMINATE_DELAY_MS` (whole milliseconds, default 0), and
/// `FLOE_SIM_FAULTS`, the failures to inject, as text: floe-compute-sim's
/// `SimulatedConfig::parse` reads it (empty: none). The worker built for
/// the emulator tests also reads `FLOE_SIM_STATE_DIR`: a folder where its
/// simulated instances are kept in a file, so that worker processes one
/// after the other see the same instances, as EC2's would (local mode
/// keeps them in its data folder).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimSettings {
    pub boot_delay: Duration,
    pub terminate_delay: Duration,
    pub faults: String,
    pub state_dir: Option<std::path::PathBuf>,
}

impl SimSettings {
    pub const FAULTS: &'static str = "FLOE_SIM_FAULTS";

    pub fn read(env: &Env) -> Result<SimSettings, ConfigError> {
        let millis = |name: &'static str| {
            env.whole(name, 0u64, "whole milliseconds")
                .map(Duration::from_millis)
        };
        Ok(SimSettings {
            boot_delay: millis("FLOE_SIM_BOOT_DELAY_MS")?,
            terminate_delay: millis("FLOE_SIM_TERMINATE_DELAY_MS")?,
            faults: env.get(SimSettings::FAULTS).unwrap_or_default(),
            state_dir: env
                .get("FLOE_SIM_STATE_DIR")
                .filter(|d| !d.trim().is_empty())
                .map(std::path::PathBuf::from),
        })
    }
}

/// EventBridge Scheduler's settings (`FLOE_SCHEDULE_GROUP`,
/// `FLOE_SNAPSHOTTER_ARN`, `FLOE_SCHEDULER_ROLE_ARN`,
/// `FLOE_SCHEDULE_DLQ_ARN`): all four, or none (no snapshot schedules).
/// `FLOE_WORK_QUEUE_ARN`, optional beside them, is where drill schedules
/// send their job; without it they cannot be written (and say so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerSettings {
    pub group: String,
    pub target_arn: String,
    pub role_arn: String,
    pub dead_letter_arn: String,
    pub drill_target_arn: Option<String>,
}

impl SchedulerSettings {
    pub const NAMES: [&'static str; 4] = [
        "FLOE_SCHEDULE_GROUP",
        "FLOE_SNAPSHOTTER_ARN",
        "FLOE_SCHEDULER_ROLE_ARN",
        "FLOE_SCHEDULE_DLQ_ARN",
    ];
    pub const DRILL_TARGET: &'static str = "FLOE_WORK_QUEUE_ARN";

    pub fn read(env: &Env) -> Result<Option<SchedulerSettings>, ConfigError> {
        let values = SchedulerSettings::NAMES.map(|n| env.get(n));
        if values.iter().all(Option::is_none) {
            return Ok(None);
        }
        let missing: Vec<&str> = SchedulerSettings::NAMES
            .iter()
            .zip(&values)
            .filter(|(_, v)| v.is_none())
            .map(|(n, _)| *n)
            .collect();
        if let Some(&first) = missing.first() {
            return Err(invalid(
                first,
                format!(
                    "{} must be set too: snapshot schedules need all of {}",
                    missing.join(", "),
                    SchedulerSettings::NAMES.join(", ")
                ),
            ));
        }
        let [group, target_arn, role_arn, dead_letter_arn] = values.map(Option::unwrap_or_default);
        let drill_target_arn = env.get(SchedulerSettings::DRILL_TARGET);
        if let Some(arn) = &drill_target_arn
            && !arn.starts_with("arn:")
        {
            return Err(invalid(
                SchedulerSettings::DRILL_TARGET,
                "must be the work queue's ARN (arn:aws:sqs:…)",
            ));
        }
        Ok(Some(SchedulerSettings {
            group,
            target_arn,
            role_arn,
            dead_letter_arn,
            drill_target_arn,
        }))
    }
}

/// Each deployment's stable endpoint name, `{deployment}.{domain}`, in a
/// Route 53 private hosted zone that the worker's plans keep pointing at
/// the nodes: `FLOE_ENDPOINT_DOMAIN` (the zone's domain, such as
/// `es.floe.internal`) and `FLOE_ENDPOINT_ZONE_ID` (the zone). Both or
/// neither; without them a deployment's view shows a node's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSettings {
    pub domain: String,
    pub zone_id: String,
}

impl EndpointSettings {
    pub fn read(env: &Env) -> Result<Option<EndpointSettings>, ConfigError> {
        match (
            env.get("FLOE_ENDPOINT_DOMAIN"),
            env.get("FLOE_ENDPOINT_ZONE_ID"),
        ) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(invalid(
                "FLOE_ENDPOINT_ZONE_ID",
                "must be set with FLOE_ENDPOINT_DOMAIN: the hosted zone of the endpoint names",
            )),
            (None, Some(_)) => Err(invalid(
                "FLOE_ENDPOINT_DOMAIN",
                "must be set with FLOE_ENDPOINT_ZONE_ID: the domain of the endpoint names",
            )),
            (Some(domain), Some(zone_id)) => {
                let domain = domain.trim_end_matches('.').to_ascii_lowercase();
                let label_ok = |l: &str| {
                    (1..=63).contains(&l.len())
                        && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                        && !l.starts_with('-')
                        && !l.ends_with('-')
                };
                // A 32-character id and a dot go in front of it.
                if domain.len() > 200 || !domain.split('.').all(label_ok) {
                    return Err(invalid(
                        "FLOE_ENDPOINT_DOMAIN",
                        "must be a DNS domain of at most 200 characters (labels of letters, digits and -)",
                    ));
                }
                Ok(Some(EndpointSettings { domain, zone_id }))
            }
        }
    }

    /// How new deployments' endpoints are named under `settings`.
    pub fn naming(settings: Option<&EndpointSettings>) -> floe_domain::access::EndpointNaming {
        match settings {
            Some(s) => floe_domain::access::EndpointNaming::Dns {
                domain: s.domain.clone(),
            },
            None => floe_domain::access::EndpointNaming::NodeAddress,
        }
    }
}

/// `FLOE_SNAPSHOT_WAIT_SECS`: how long one snapshotter run waits for its
/// snapshot.
pub fn snapshot_wait(env: &Env) -> Result<Duration, ConfigError> {
    match env.get("FLOE_SNAPSHOT_WAIT_SECS") {
        None => Ok(DEFAULT_SNAPSHOT_WAIT),
        Some(s) => match s.parse::<u64>().map(Duration::from_secs) {
            Ok(d) if d <= MAX_SNAPSHOT_WAIT => Ok(d),
            _ => Err(invalid(
                "FLOE_SNAPSHOT_WAIT_SECS",
                format!(
                    "must be whole seconds from 0 to {} (Lambda runs 15 minutes at most)",
                    MAX_SNAPSHOT_WAIT.as_secs()
                ),
            )),
        },
    }
}

/// The api function on Lambda.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfig {
    pub store: StoreChoice,
    pub auth: AuthConfig,
    pub secrets: SecretsConfig,
    pub allow_private_endpoints: bool,
    /// Without a queue, plans still start: the worker's sweep finds them.
    pub queue_url: Option<String>,
    /// The nodes' HTTP port; the api speaks HTTPS to them, pinned to each
    /// deployment's CA.
    pub node_http: NodeHttp,
    /// How new deployments' endpoints are named.
    pub endpoints: Option<EndpointSettings>,
}

impl ApiConfig {
    pub fn read(env: &Env) -> Result<ApiConfig, ConfigError> {
        Ok(ApiConfig {
            store: StoreChoice::read_table(env)?,
            auth: AuthConfig::read(env)?,
            secrets: SecretsConfig::read(env),
            allow_private_endpoints: allow_private_endpoints(env)?,
            queue_url: queue_url(env)?,
            node_http: NodeHttp::read(env)?,
            endpoints: EndpointSettings::read(env)?,
        })
    }
}

/// The worker function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    pub store: StoreChoice,
    pub queue_url: String,
    /// The region the worker and the nodes run in (`AWS_REGION`).
    pub region: String,
    pub parameter_prefix: String,
    pub compute: ComputeChoice,
    pub node_http: NodeHttp,
    pub scheduler: Option<SchedulerSettings>,
    pub secrets: SecretsConfig,
    /// The hosted zone the plans keep the endpoint names in.
    pub endpoints: Option<EndpointSettings>,
    /// `FLOE_ALLOW_PRIVATE_ENDPOINTS`, as the API reads it: the plans hold
    /// repository endpoints to the same policy again.
    pub allow_private_endpoints: bool,
    /// `FLOE_EVENT_BUS`: the EventBridge bus failed drills and breached
    /// recovery targets are published on (`default` unless set).
    pub event_bus: String,
}

impl WorkerConfig {
    pub fn read(env: &Env) -> Result<WorkerConfig, ConfigError> {
        let store = StoreChoice::read_table(env)?;
        let queue_url = queue_url(env)?
            .ok_or_else(|| invalid("FLOE_QUEUE_URL", "is required: the URL of the work queue"))?;
        Ok(WorkerConfig {
            store,
            queue_url,
            region: env.required("AWS_REGION", "the region the worker and the nodes run in")?,
            parameter_prefix: parameter_prefix(env)?,
            compute: ComputeChoice::read(env)?,
            node_http: NodeHttp::read(env)?,
            scheduler: SchedulerSettings::read(env)?,
            secrets: kms_secrets(env)?,
            endpoints: EndpointSettings::read(env)?,
            allow_private_endpoints: allow_private_endpoints(env)?,
            event_bus: event_bus(env)?,
        })
    }
}

/// `FLOE_EVENT_BUS`: a bus name (1 to 256 of `[A-Za-z0-9._/-]`) or a bus's
/// ARN; `default` when unset.
fn event_bus(env: &Env) -> Result<String, ConfigError> {
    let Some(bus) = env.get("FLOE_EVENT_BUS") else {
        return Ok("default".into());
    };
    let name_ok = (1..=256).contains(&bus.len())
        && bus
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'));
    if bus.starts_with("arn:") || name_ok {
        Ok(bus)
    } else {
        Err(invalid(
            "FLOE_EVENT_BUS",
            "must be an EventBridge bus name (letters, digits, . _ - /) or its ARN",
        ))
    }
}

/// The snapshotter function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotterConfig {
    pub store: StoreChoice,
    pub node_http: NodeHttp,
    pub wait: Duration,
    pub parameter_prefix: String,
}

impl SnapshotterConfig {
    pub fn read(env: &Env) -> Result<SnapshotterConfig, ConfigError> {
        Ok(SnapshotterConfig {
            store: StoreChoice::read_table(env)?,
            node_http: NodeHttp::read(env)?,
            wait: snapshot_wait(env)?,
            parameter_prefix: parameter_prefix(env)?,
        })
    }
}

/// Local mode: the whole platform in one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalConfig {
    /// `FLOE_DATA_DIR`.
    pub data_dir: PathBuf,
    /// `FLOE_LISTEN`.
    pub listen: String,
    pub store: StoreChoice,
    pub auth: AuthConfig,
    pub secrets: SecretsConfig,
    pub allow_private_endpoints: bool,
    /// `FLOE_PLAN_POLL_MS`: how often a waiting plan step looks again.
    pub plan_poll: Duration,
    /// `FLOE_SWEEP_INTERVAL_MS` (60000, as the worker's schedule): how
    /// often the in-process sweep re-queues stalled plans and checks the
    /// running deployments' health.
    pub sweep_interval: Duration,
    pub parameter_prefix: String,
    pub sim: SimSettings,
    /// `FLOE_ES_PORT` (9200): the port each simulated node serves HTTPS on,
    /// at its instance's own loopback address, as a real node does at its
    /// private address. `FLOE_ES_SCHEME` is read too but local mode's
    /// nodes are always secured, as Floe's real ones are.
    pub node_http: NodeHttp,
    /// `FLOE_LOCAL_S3`: where local mode serves its S3-compatible store
    /// (`127.0.0.1:9000` unless set; `off` serves none).
    pub s3: Option<std::net::SocketAddr>,
    /// `FLOE_LOCAL_OFFLINE`: resolve no host names (IP literals and
    /// `localhost` only), so that a test's server asks no DNS server.
    pub offline: bool,
}

/// Local mode's S3-compatible store listens here unless told otherwise.
pub const DEFAULT_LOCAL_S3: &str = "127.0.0.1:9000";

fn local_s3(env: &Env) -> Result<Option<std::net::SocketAddr>, ConfigError> {
    let value = env
        .get("FLOE_LOCAL_S3")
        .unwrap_or_else(|| DEFAULT_LOCAL_S3.to_string());
    if value == "off" {
        return Ok(None);
    }
    match value.parse::<std::net::SocketAddr>() {
        Ok(addr) if addr.ip().is_loopback() => Ok(Some(addr)),
        _ => Err(invalid(
            "FLOE_LOCAL_S3",
            "must be a loopback ip:port such as 127.0.0.1:9000, or off",
        )),
    }
}

fn sweep_interval(env: &Env) -> Result<Duration, ConfigError> {
    let ms: u64 = env.whole(
        "FLOE_SWEEP_INTERVAL_MS",
        60_000,
        "whole milliseconds, at least 10",
    )?;
    if ms < 10 {
        return Err(invalid(
            "FLOE_SWEEP_INTERVAL_MS",
            "must be whole milliseconds, at least 10",
        ));
    }
    Ok(Duration::from_millis(ms))
}

impl LocalConfig {
    pub fn read(env: &Env) -> Result<LocalConfig, ConfigError> {
        Ok(LocalConfig {
            data_dir: data_dir(env),
            listen: env
                .get("FLOE_LISTEN")
                .unwrap_or_else(|| DEFAULT_LISTEN.to_string()),
            store: StoreChoice::read(env)?,
            auth: AuthConfig::read(env)?,
            secrets: SecretsConfig::read(env),
            allow_private_endpoints: allow_private_endpoints(env)?,
            plan_poll: Duration::from_millis(env.whole(
                "FLOE_PLAN_POLL_MS",
                1000u64,
                "whole milliseconds",
            )?),
            sweep_interval: sweep_interval(env)?,
            parameter_prefix: parameter_prefix(env)?,
            sim: SimSettings::read(env)?,
            s3: local_s3(env)?,
            node_http: NodeHttp::read(env)?,
            offline: env.flag("FLOE_LOCAL_OFFLINE")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_names_need_a_domain_and_a_zone_together() {
        let read = |pairs: &[(&str, &str)]| EndpointSettings::read(&Env::from_pairs(pairs));
        assert_eq!(read(&[]).ok(), Some(None));
        let both = read(&[
            ("FLOE_ENDPOINT_DOMAIN", "ES.Floe.Internal."),
            ("FLOE_ENDPOINT_ZONE_ID", "Z0123456789ABC"),
        ]);
        assert_eq!(
            both.ok().flatten(),
            Some(EndpointSettings {
                domain: "es.floe.internal".into(),
                zone_id: "Z0123456789ABC".into()
            })
        );
        for pairs in [
            &[("FLOE_ENDPOINT_DOMAIN", "es.floe.internal")][..],
            &[("FLOE_ENDPOINT_ZONE_ID", "Z0123")][..],
            &[
                ("FLOE_ENDPOINT_DOMAIN", "bad_label.internal"),
                ("FLOE_ENDPOINT_ZONE_ID", "Z0123"),
            ][..],
            &[
                ("FLOE_ENDPOINT_DOMAIN", "-x.internal"),
                ("FLOE_ENDPOINT_ZONE_ID", "Z0123"),
            ][..],
        ] {
            assert!(read(pairs).is_err(), "{pairs:?}");
        }
        assert_eq!(
            EndpointSettings::naming(None),
            floe_domain::access::EndpointNaming::NodeAddress
        );
    }

    const WORKER: &[(&str, &str)] = &[
        ("FLOE_STORE", "dynamodb://floe-records"),
        (
            "FLOE_QUEUE_URL",
            "https://sqs.eu-west-1.amazonaws.com/123456789012/floe-work",
        ),
        ("AWS_REGION", "eu-west-1"),
        ("FLOE_EC2_IMAGE_ARM64", "ami-0aaa"),
        ("FLOE_EC2_IMAGE_X86_64", "ami-0bbb"),
        ("FLOE_EC2_SUBNETS", "subnet-a, subnet-b,subnet-c"),
        ("FLOE_EC2_SECURITY_GROUPS", "sg-1"),
        (
            "FLOE_NODE_PERMISSIONS_BOUNDARY",
            "arn:aws:iam::123456789012:policy/floe-node-boundary",
        ),
        (
            "FLOE_KMS_KEY_ID",
            "arn:aws:kms:eu-west-1:123456789012:key/k",
        ),
    ];

    /// The base set with `extra` replacing (or, empty, removing) variables.
    fn with(base: &[(&'static str, &'static str)], extra: &[(&'static str, &'static str)]) -> Env {
        let mut all: Vec<(&str, &str)> = base
            .iter()
            .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k))
            .copied()
            .collect();
        all.extend(extra.iter().filter(|(_, v)| !v.is_empty()).copied());
        Env::from_pairs(&all)
    }

    #[test]
    fn a_complete_worker_configuration_is_read() -> Result<(), ConfigError> {
        let c = WorkerConfig::read(&Env::from_pairs(WORKER))?;
        assert_eq!(
            c.store,
            StoreChoice::Dynamo {
                table: "floe-records".into(),
                create: false
            }
        );
        assert_eq!(c.region, "eu-west-1");
        assert_eq!(c.parameter_prefix, "/floe");
        let ComputeChoice::Ec2(ec2) = c.compute else {
            return Err(invalid("FLOE_COMPUTE", "expected ec2"));
        };
        assert_eq!(ec2.subnets, ["subnet-a", "subnet-b", "subnet-c"]);
        assert_eq!(ec2.security_groups, ["sg-1"]);
        assert_eq!(
            ec2.identity,
            NodeIdentitySettings {
                permissions_boundary: "arn:aws:iam::123456789012:policy/floe-node-boundary".into(),
                partition: "aws".into(),
                account: "123456789012".into(),
                path: "/floe-nodes/".into(),
                snapshot_buckets: Vec::new(),
            }
        );
        assert_eq!(ec2.key_name, None);
        assert_eq!(c.scheduler, None);
        assert_eq!(c.event_bus, "default");
        let c = WorkerConfig::read(&with(WORKER, &[("FLOE_EVENT_BUS", "ops-alerts")]))?;
        assert_eq!(c.event_bus, "ops-alerts");
        let bad = WorkerConfig::read(&with(WORKER, &[("FLOE_EVENT_BUS", "ops alerts")])).err();
        assert_eq!(bad.map(|e| e.name), Some("FLOE_EVENT_BUS"));
        let c = WorkerConfig::read(&with(WORKER, &[("FLOE_PARAMETER_PREFIX", "/prod/floe")]))?;
        assert_eq!(c.parameter_prefix, "/prod/floe");
        let c = WorkerConfig::read(&with(
            WORKER,
            &[
                ("FLOE_NODE_IAM_PATH", "/prod/floe-nodes/"),
                ("FLOE_NODE_SNAPSHOT_BUCKETS", "snaps-a, snaps.b"),
            ],
        ))?;
        let ComputeChoice::Ec2(ec2) = c.compute else {
            return Err(invalid("FLOE_COMPUTE", "expected ec2"));
        };
        assert_eq!(ec2.identity.path, "/prod/floe-nodes/");
        assert_eq!(ec2.identity.snapshot_buckets, ["snaps-a", "snaps.b"]);
        Ok(())
    }

    #[test]
    fn simulated_compute_needs_no_ec2_settings() -> Result<(), ConfigError> {
        let c = WorkerConfig::read(&Env::from_pairs(&[
            ("FLOE_STORE", "dynamodb://floe-records"),
            ("FLOE_QUEUE_URL", "http://127.0.0.1:5000/123456789012/work"),
            ("AWS_REGION", "us-east-1"),
            ("FLOE_COMPUTE", "simulated"),
            ("FLOE_KMS_KEY_ID", "k"),
        ]))?;
        assert_eq!(c.compute, ComputeChoice::Simulated(SimSettings::default()));
        Ok(())
    }

    #[test]
    fn simulated_instances_read_their_delays_and_keep_the_faults_text() -> Result<(), ConfigError> {
        let c = LocalConfig::read(&Env::from_pairs(&[]))?;
        assert_eq!(c.sim, SimSettings::default());
        assert_eq!(c.sim.boot_delay, Duration::ZERO);
        let c = LocalConfig::read(&Env::from_pairs(&[
            ("FLOE_SIM_FAULTS", "  "),
            ("FLOE_SIM_BOOT_DELAY_MS", ""),
        ]))?;
        assert_eq!(c.sim, SimSettings::default());
        let faults = "launch:1:1:permanent, capacity:0";
        let c = LocalConfig::read(&Env::from_pairs(&[
            ("FLOE_SIM_BOOT_DELAY_MS", "1500"),
            ("FLOE_SIM_TERMINATE_DELAY_MS", " 200 "),
            ("FLOE_SIM_FAULTS", faults),
        ]))?;
        assert_eq!(
            c.sim,
            SimSettings {
                boot_delay: Duration::from_millis(1500),
                terminate_delay: Duration::from_millis(200),
                faults: faults.into(),
                state_dir: None,
            }
        );
        // The worker built for the emulator tests reads the same settings.
        let w = WorkerConfig::read(&Env::from_pairs(&[
            ("FLOE_STORE", "dynamodb://floe-records"),
            ("FLOE_QUEUE_URL", "http://127.0.0.1:5000/123456789012/work"),
            ("AWS_REGION", "us-east-1"),
            ("FLOE_COMPUTE", "simulated"),
            ("FLOE_KMS_KEY_ID", "k"),
            ("FLOE_SIM_BOOT_DELAY_MS", "0"),
            ("FLOE_SIM_TERMINATE_DELAY_MS", "50"),
        ]))?;
        let ComputeChoice::Simulated(sim) = w.compute else {
            return Err(invalid("FLOE_COMPUTE", "expected simulated"));
        };
        assert_eq!(sim.terminate_delay, Duration::from_millis(50));
        for (name, value) in [
            ("FLOE_SIM_BOOT_DELAY_MS", "fast"),
            ("FLOE_SIM_BOOT_DELAY_MS", "-1"),
            ("FLOE_SIM_TERMINATE_DELAY_MS", "1.5"),
        ] {
            match LocalConfig::read(&Env::from_pairs(&[(name, value)])) {
                Err(e) => assert_eq!(e.name, name, "{name}={value:?}: {e}"),
                Ok(c) => panic!("{name}={value:?} was accepted: {c:?}"),
            }
        }
        Ok(())
    }

    #[test]
    fn each_worker_mistake_names_its_variable() {
        let cases: &[(&[(&'static str, &'static str)], &str)] = &[
            (&[("FLOE_STORE", "")], "FLOE_STORE"),
            (&[("FLOE_STORE", "sqlite://.floe/floe.db")], "FLOE_STORE"),
            (&[("FLOE_STORE", "dynamodb://a b")], "FLOE_STORE"),
            (&[("FLOE_QUEUE_URL", "")], "FLOE_QUEUE_URL"),
            (&[("FLOE_QUEUE_URL", "floe-work")], "FLOE_QUEUE_URL"),
            (&[("AWS_REGION", "")], "AWS_REGION"),
            (&[("FLOE_COMPUTE", "fargate")], "FLOE_COMPUTE"),
            (
                &[("FLOE_PARAMETER_PREFIX", "floe")],
                "FLOE_PARAMETER_PREFIX",
            ),
            (&[("FLOE_EC2_IMAGE_ARM64", "")], "FLOE_EC2_IMAGE_ARM64"),
            (
                &[("FLOE_EC2_IMAGE_X86_64", "img-1")],
                "FLOE_EC2_IMAGE_X86_64",
            ),
            (&[("FLOE_EC2_SUBNETS", " , ")], "FLOE_EC2_SUBNETS"),
            (
                &[("FLOE_EC2_SUBNETS", "subnet-a,vpc-b")],
                "FLOE_EC2_SUBNETS",
            ),
            (
                &[("FLOE_EC2_SECURITY_GROUPS", "")],
                "FLOE_EC2_SECURITY_GROUPS",
            ),
            (
                &[("FLOE_EC2_INSTANCE_PROFILE", "floe-node")],
                "FLOE_EC2_INSTANCE_PROFILE",
            ),
            (
                &[("FLOE_NODE_PERMISSIONS_BOUNDARY", "")],
                "FLOE_NODE_PERMISSIONS_BOUNDARY",
            ),
            (
                &[(
                    "FLOE_NODE_PERMISSIONS_BOUNDARY",
                    "arn:aws:iam::aws:policy/AdministratorAccess",
                )],
                "FLOE_NODE_PERMISSIONS_BOUNDARY",
            ),
            (
                &[(
                    "FLOE_NODE_PERMISSIONS_BOUNDARY",
                    "arn:aws:iam::123456789012:role/x",
                )],
                "FLOE_NODE_PERMISSIONS_BOUNDARY",
            ),
            (&[("FLOE_NODE_IAM_PATH", "/")], "FLOE_NODE_IAM_PATH"),
            (
                &[("FLOE_NODE_IAM_PATH", "floe-nodes")],
                "FLOE_NODE_IAM_PATH",
            ),
            (&[("FLOE_NODE_IAM_PATH", "/floe*/")], "FLOE_NODE_IAM_PATH"),
            (
                &[("FLOE_NODE_SNAPSHOT_BUCKETS", "ok-bucket,bad/bucket")],
                "FLOE_NODE_SNAPSHOT_BUCKETS",
            ),
            (
                &[("FLOE_NODE_SNAPSHOT_BUCKETS", "*")],
                "FLOE_NODE_SNAPSHOT_BUCKETS",
            ),
            (&[("FLOE_ES_SCHEME", "ftp")], "FLOE_ES_SCHEME"),
            (&[("FLOE_ES_PORT", "0")], "FLOE_ES_PORT"),
            (&[("FLOE_SCHEDULE_GROUP", "floe")], "FLOE_SNAPSHOTTER_ARN"),
            (&[("FLOE_KMS_KEY_ID", "")], "FLOE_KMS_KEY_ID"),
        ];
        for (extra, name) in cases {
            match WorkerConfig::read(&with(WORKER, extra)) {
                Err(e) => assert_eq!(e.name, *name, "{extra:?}: {e}"),
                Ok(c) => panic!("{extra:?} was accepted: {c:?}"),
            }
        }
    }

    #[test]
    fn the_scheduler_takes_all_four_settings_or_none() -> Result<(), ConfigError> {
        let all = [
            ("FLOE_SCHEDULE_GROUP", "floe"),
            (
                "FLOE_SNAPSHOTTER_ARN",
                "arn:aws:lambda:eu-west-1:1:function:s",
            ),
            ("FLOE_SCHEDULER_ROLE_ARN", "arn:aws:iam::1:role/r"),
            ("FLOE_SCHEDULE_DLQ_ARN", "arn:aws:sqs:eu-west-1:1:dlq"),
        ];
        let s = SchedulerSettings::read(&Env::from_pairs(&all))?
            .ok_or_else(|| invalid("FLOE_SCHEDULE_GROUP", "missing"))?;
        assert_eq!(s.group, "floe");
        assert_eq!(s.drill_target_arn, None);
        let queue = "arn:aws:sqs:eu-west-1:1:work";
        let with_queue = [&all[..], &[("FLOE_WORK_QUEUE_ARN", queue)]].concat();
        let s = SchedulerSettings::read(&Env::from_pairs(&with_queue))?
            .ok_or_else(|| invalid("FLOE_SCHEDULE_GROUP", "missing"))?;
        assert_eq!(s.drill_target_arn.as_deref(), Some(queue));
        let bad = [&all[..], &[("FLOE_WORK_QUEUE_ARN", "work")]].concat();
        let e = SchedulerSettings::read(&Env::from_pairs(&bad)).err();
        assert_eq!(e.map(|e| e.name), Some("FLOE_WORK_QUEUE_ARN"));
        assert_eq!(SchedulerSettings::read(&Env::from_pairs(&[]))?, None);
        let e = SchedulerSettings::read(&Env::from_pairs(&all[..3])).err();
        assert_eq!(e.map(|e| e.name), Some("FLOE_SCHEDULE_DLQ_ARN"));
        // One set names the missing ones, not the one that is set.
        let e = SchedulerSettings::read(&Env::from_pairs(&all[..1]))
            .err()
            .ok_or_else(|| invalid("FLOE_SCHEDULE_GROUP", "accepted"))?;
        assert_eq!(e.name, "FLOE_SNAPSHOTTER_ARN");
        assert!(e.message.contains("FLOE_SNAPSHOTTER_ARN"), "{e}");
        assert!(!e.message.starts_with("FLOE_SCHEDULE_GROUP"), "{e}");
        assert!(!e.to_string().starts_with("FLOE_SCHEDULE_GROUP"), "{e}");
        Ok(())
    }

    #[test]
    fn the_snapshotter_needs_only_the_table_and_bounds_its_wait() -> Result<(), ConfigError> {
        let base = [("FLOE_STORE", "dynamodb://floe-records")];
        let c = SnapshotterConfig::read(&Env::from_pairs(&base))?;
        assert_eq!(c.wait, DEFAULT_SNAPSHOT_WAIT);
        assert_eq!(
            c.node_http,
            NodeHttp {
                https: true,
                port: 9200
            }
        );
        let c = SnapshotterConfig::read(&Env::from_pairs(&[
            ("FLOE_STORE", " dynamodb://floe-test "),
            ("FLOE_ES_SCHEME", "http"),
            ("FLOE_ES_PORT", "9243"),
            ("FLOE_SNAPSHOT_WAIT_SECS", "120"),
            ("FLOE_PARAMETER_PREFIX", "/prod/floe"),
        ]))?;
        assert_eq!(
            c,
            SnapshotterConfig {
                store: StoreChoice::Dynamo {
                    table: "floe-test".into(),
                    create: false
                },
                node_http: NodeHttp {
                    https: false,
                    port: 9243
                },
                wait: Duration::from_secs(120),
                parameter_prefix: "/prod/floe".into(),
            }
        );
        for (extra, name) in [
            (("FLOE_ES_PORT", "99999"), "FLOE_ES_PORT"),
            (("FLOE_ES_PORT", "70000"), "FLOE_ES_PORT"),
            (("FLOE_ES_PORT", "x"), "FLOE_ES_PORT"),
            (("FLOE_ES_PORT", "0"), "FLOE_ES_PORT"),
            (("FLOE_ES_SCHEME", "ftp"), "FLOE_ES_SCHEME"),
            (("FLOE_SNAPSHOT_WAIT_SECS", "-1"), "FLOE_SNAPSHOT_WAIT_SECS"),
            (("FLOE_PARAMETER_PREFIX", "floe"), "FLOE_PARAMETER_PREFIX"),
            (("FLOE_STORE", "sqlite:///tmp/floe.db"), "FLOE_STORE"),
        ] {
            let e = SnapshotterConfig::read(&with(&base, &[extra]));
            assert_eq!(e.err().map(|e| e.name), Some(name), "{extra:?}");
        }
        let e = SnapshotterConfig::read(&with(&base, &[("FLOE_SNAPSHOT_WAIT_SECS", "900")]));
        assert_eq!(e.err().map(|e| e.name), Some("FLOE_SNAPSHOT_WAIT_SECS"));
        let e = SnapshotterConfig::read(&Env::from_pairs(&[]));
        assert_eq!(e.err().map(|e| e.name), Some("FLOE_STORE"));
        Ok(())
    }

    #[test]
    fn a_jwks_url_reads_its_cache_settings() -> Result<(), ConfigError> {
        let base: &[(&str, &str)] = &[
            ("FLOE_JWKS_URL", "https://issuer.example.com/jwks.json"),
            ("FLOE_JWT_ISSUER", "https://issuer.example.com"),
            ("FLOE_JWT_AUDIENCE", "floe-api"),
        ];
        let c = AuthConfig::read(&Env::from_pairs(base))?;
        assert_eq!(
            c.keys,
            TokenKeys::JwksUrl {
                url: "https://issuer.example.com/jwks.json".into(),
                cache: JwksCacheSettings::default(),
            }
        );
        let c = AuthConfig::read(&with(
            base,
            &[
                ("FLOE_JWKS_TTL_SECS", "3600"),
                ("FLOE_JWKS_REFETCH_SECS", "5"),
            ],
        ))?;
        assert_eq!(
            c.keys,
            TokenKeys::JwksUrl {
                url: "https://issuer.example.com/jwks.json".into(),
                cache: JwksCacheSettings {
                    default_ttl: Duration::from_secs(3600),
                    refetch_interval: Duration::from_secs(5),
                },
            }
        );
        for (name, value) in [
            ("FLOE_JWKS_TTL_SECS", "59"),
            ("FLOE_JWKS_TTL_SECS", "86401"),
            ("FLOE_JWKS_TTL_SECS", "10m"),
            ("FLOE_JWKS_REFETCH_SECS", "0"),
            ("FLOE_JWKS_REFETCH_SECS", "3601"),
            ("FLOE_JWKS_REFETCH_SECS", "-1"),
        ] {
            let e = AuthConfig::read(&with(base, &[(name, value)]));
            assert_eq!(e.err().map(|e| e.name), Some(name), "{name}={value}");
        }
        Ok(())
    }

    #[test]
    fn local_mode_defaults_to_sqlite_in_the_data_folder() -> Result<(), ConfigError> {
        let c = LocalConfig::read(&Env::from_pairs(&[("FLOE_DATA_DIR", "/tmp/f")]))?;
        assert_eq!(
            c.store,
            StoreChoice::Sqlite(PathBuf::from("/tmp/f/floe.db"))
        );
        assert_eq!(
            c.auth.keys,
            TokenKeys::SecretFile(PathBuf::from("/tmp/f/jwt.secret"))
        );
        assert_eq!(c.secrets.key_file, PathBuf::from("/tmp/f/secrets.key"));
        assert_eq!(c.listen, DEFAULT_LISTEN);
        assert_eq!(c.plan_poll, Duration::from_secs(1));
        assert_eq!(c.sweep_interval, Duration::from_secs(60));
        let cases: &[(&[(&'static str, &'static str)], &str)] = &[
            (&[("FLOE_STORE", "postgres://x")], "FLOE_STORE"),
            (&[("FLOE_STORE", "sqlite://")], "FLOE_STORE"),
            (&[("FLOE_JWT_SECRET", "short")], "FLOE_JWT_SECRET"),
            (&[("FLOE_JWKS_FILE", "/k.json")], "FLOE_JWT_ISSUER"),
            (
                &[("FLOE_ALLOW_PRIVATE_ENDPOINTS", "yes")],
                "FLOE_ALLOW_PRIVATE_ENDPOINTS",
            ),
            (&[("FLOE_PLAN_POLL_MS", "1s")], "FLOE_PLAN_POLL_MS"),
            (&[("FLOE_SWEEP_INTERVAL_MS", "5")], "FLOE_SWEEP_INTERVAL_MS"),
            (
                &[("FLOE_SWEEP_INTERVAL_MS", "1m")],
                "FLOE_SWEEP_INTERVAL_MS",
            ),
            (
                &[
                    ("FLOE_CREATE_TABLE", "maybe"),
                    ("FLOE_STORE", "dynamodb://t-1"),
                ],
                "FLOE_CREATE_TABLE",
            ),
        ];
        for (extra, name) in cases {
            match LocalConfig::read(&with(&[], extra)) {
                Err(e) => assert_eq!(e.name, *name, "{extra:?}: {e}"),
                Ok(c) => panic!("{extra:?} was accepted: {c:?}"),
            }
        }
        Ok(())
    }
}
