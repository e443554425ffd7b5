//! Snapshot repositories: where deployments keep their snapshots.

use crate::bytesize::parse_byte_size;
use crate::codes::Code;
use crate::names::validate_name;
use crate::secret::{Sealed, SecretString, mask_access_key};
use crate::validation::{Invalid, Problems};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Http,
    Https,
}

/// What a client sends to create or replace a repository.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(
    tag = "type",
    content = "settings",
    rename_all = "lowercase",
    deny_unknown_fields
)]
pub enum RepositoryRequest {
    S3(S3SettingsRequest),
    Fs(FsSettings),
}

/// Settings of an `s3` repository, as Elasticsearch's `repository-s3` names them.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct S3SettingsRequest {
    pub bucket: String,
    #[serde(default)]
    pub base_path: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
    /// `host` or `host:port` of an S3-compatible store; no scheme (see `protocol`).
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub protocol: Option<Protocol>,
    #[serde(default)]
    pub path_style_access: Option<bool>,
    #[serde(default)]
    pub access_key: Option<String>,
    /// Write-only: never returned.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = Password, write_only)]
    pub secret_key: Option<SecretString>,
    /// Write-only: never returned.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = Password, write_only)]
    pub session_token: Option<SecretString>,
    #[serde(default)]
    pub server_side_encryption: Option<bool>,
    #[serde(default)]
    pub compress: Option<bool>,
    /// Elasticsearch byte size, e.g. `1gb`.
    #[serde(default)]
    pub chunk_size: Option<String>,
    /// Elasticsearch byte size per second, e.g. `150mb`; `0` for unlimited.
    #[serde(default)]
    pub max_snapshot_bytes_per_sec: Option<String>,
    /// Elasticsearch byte size per second, e.g. `1gb`; `0` for unlimited.
    #[serde(default)]
    pub max_restore_bytes_per_sec: Option<String>,
    /// Not an Elasticsearch setting. Whether other organizations may have
    /// repositories on the same endpoint and bucket. Without it, a
    /// repository is refused (409 `repositories.bucket_claimed`) when
    /// another organization's repository is there and either has keys of
    /// its own: any key that reaches one path of a bucket usually reaches
    /// all of it, so each organization's tenants could read, overwrite and
    /// delete the other's snapshots. Both repositories must be marked for
    /// them to share the bucket. Only platform admins write repositories.
    #[serde(default)]
    pub shared_across_organizations: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FsSettings {
    /// A folder under the cluster's `path.repo` (local use).
    #[schema(min_length = 1)]
    pub location: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compress: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_snapshot_bytes_per_sec: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restore_bytes_per_sec: Option<String>,
}

/// A repository as stored: secrets sealed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repository {
    pub org: String,
    pub name: String,
    pub settings: RepositorySettings,
    pub created: chrono::DateTime<chrono::Utc>,
    pub updated: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "settings", rename_all = "lowercase")]
pub enum RepositorySettings {
    S3(S3Settings),
    Fs(FsSettings),
}

impl RepositorySettings {
    /// The first part of where snapshots are kept that differs between
    /// `self` and `other`, by its field name in a request (`type`,
    /// `settings.bucket`, …), or `None` when both name one place. Clients,
    /// throttles and credentials may change under a deployment; the place
    /// may not, or the snapshots already taken vanish from its view.
    pub fn moved_from(&self, other: &RepositorySettings) -> Option<&'static str> {
        fn trimmed(p: &Option<String>) -> &str {
            p.as_deref().unwrap_or("").trim_matches('/')
        }
        match (self, other) {
            (RepositorySettings::S3(a), RepositorySettings::S3(b)) => {
                if a.bucket != b.bucket {
                    Some("settings.bucket")
                } else if trimmed(&a.base_path) != trimmed(&b.base_path) {
                    Some("settings.base_path")
                } else {
                    None
                }
            }
            (RepositorySettings::Fs(a), RepositorySettings::Fs(b)) => {
                (a.location.trim_end_matches('/') != b.location.trim_end_matches('/'))
                    .then_some("settings.location")
            }
            _ => Some("type"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct S3Settings {
    pub bucket: String,
    pub base_path: Option<String>,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub protocol: Option<Protocol>,
    pub path_style_access: Option<bool>,
    pub access_key: Option<String>,
    pub secret_key: Option<Sealed>,
    pub session_token: Option<Sealed>,
    pub server_side_encryption: Option<bool>,
    pub compress: Option<bool>,
    pub chunk_size: Option<String>,
    pub max_snapshot_bytes_per_sec: Option<String>,
    pub max_restore_bytes_per_sec: Option<String>,
    /// See [`S3SettingsRequest::shared_across_organizations`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_across_organizations: bool,
}

/// Which repository endpoints the control plane may be pointed at. A
/// repository endpoint is user input that the platform (and later its
/// clusters) will connect to, so addresses that reach the platform itself
/// are refused before anything connects.
#[derive(Debug, Clone, Copy, Default)]
pub struct EndpointPolicy {
    /// Private, loopback and unique-local addresses are allowed (on-premises
    /// stores such as FlashBlade usually live there). Link-local and the
    /// instance metadata service never are.
    pub allow_private: bool,
    /// The platform's own store (local mode's S3-compatible endpoint on
    /// loopback): allowed as `ip:port` even when private endpoints are not.
    pub trusted: Option<std::net::SocketAddr>,
}

/// Whether nodes set up for `own` (the deployment's repository, or none:
/// the instance role on AWS S3) can read `other`. Each node has one S3
/// client, so a repository needing another endpoint or other keys is out
/// of its reach. The API checks it before a clone or restore is planned.
pub fn reachable_with(own: Option<&Repository>, other: &Repository) -> bool {
    let RepositorySettings::S3(o) = &other.settings else {
        // A shared filesystem needs no client.
        return true;
    };
    match own.map(|r| &r.settings) {
        Some(RepositorySettings::S3(a)) => {
            a.endpoint == o.endpoint
                && a.protocol == o.protocol
                && a.path_style_access == o.path_style_access
                && a.region == o.region
                && a.access_key == o.access_key
        }
        // The default client: AWS S3 with the nodes' instance role.
        _ => o.endpoint.is_none() && o.access_key.is_none(),
    }
}

impl RepositoryRequest {
    /// Checks every field, reporting all problems at once.
    pub fn validate(&self, policy: EndpointPolicy) -> Result<(), Invalid> {
        let mut p = Problems::new();
        match self {
            RepositoryRequest::S3(s) => {
                let f = |name: &str| format!("settings.{name}");
                p.check(
                    f("bucket"),
                    Code::VALIDATION_BUCKET,
                    validate_bucket(&s.bucket),
                );
                if let Some(b) = &s.base_path {
                    p.check(
                        f("base_path"),
                        Code::VALIDATION_BASE_PATH,
                        validate_base_path(b),
                    );
                }
                if let Some(r) = &s.region {
                    p.check(f("region"), Code::VALIDATION_REGION, validate_region(r));
                }
                if let Some(e) = &s.endpoint {
                    p.check(
                        f("endpoint"),
                        Code::VALIDATION_ENDPOINT,
                        validate_endpoint(e, policy),
                    );
                }
                if let Some(k) = &s.access_key {
                    p.check(
                        f("access_key"),
                        Code::VALIDATION_ACCESS_KEY,
                        validate_key_text(k, 128),
                    );
                }
                if s.access_key.is_none() && s.secret_key.is_some() {
                    p.push(
                        f("access_key"),
                        Code::VALIDATION_REQUIRED,
                        "is required when secret_key is set",
                    );
                }
                if let Some(secret) = &s.secret_key {
                    p.check(
                        f("secret_key"),
                        Code::VALIDATION_SECRET_KEY,
                        validate_key_text(secret.expose(), 1024),
                    );
                }
                if let Some(token) = &s.session_token {
                    if s.access_key.is_none() {
                        p.push(
                            f("access_key"),
                            Code::VALIDATION_REQUIRED,
                            "is required when session_token is set",
                        );
                    }
                    p.check(
                        f("session_token"),
                        Code::VALIDATION_SESSION_TOKEN,
                        validate_key_text(token.expose(), 4096),
                    );
                }
                if let Some(c) = &s.chunk_size {
                    p.check(
                        f("chunk_size"),
                        Code::VALIDATION_BYTE_SIZE,
                        validate_chunk_size(c),
                    );
                }
                check_throttles(
                    &mut p,
                    &s.max_snapshot_bytes_per_sec,
                    &s.max_restore_bytes_per_sec,
                );
            }
            RepositoryRequest::Fs(s) => {
                p.check(
                    "settings.location",
                    Code::VALIDATION_LOCATION,
                    validate_location(&s.location),
                );
                check_throttles(
                    &mut p,
                    &s.max_snapshot_bytes_per_sec,
                    &s.max_restore_bytes_per_sec,
                );
            }
        }
        p.finish()
    }
}

fn check_throttles(p: &mut Problems, snapshot: &Option<String>, restore: &Option<String>) {
    for (name, value) in [
        ("max_snapshot_bytes_per_sec", snapshot),
        ("max_restore_bytes_per_sec", restore),
    ] {
        if let Some(v) = value {
            p.check(
                format!("settings.{name}"),
                Code::VALIDATION_BYTE_SIZE,
                parse_byte_size(v).map(|_| ()),
            );
        }
    }
}

/// S3's bucket naming rules (the subset that matters: length, characters,
/// no IP-address look-alikes, no `..`).
pub fn validate_bucket(b: &str) -> Result<(), String> {
    if b.len() < 3 || b.len() > 63 {
        return Err("must be 3 to 63 characters".into());
    }
    if !b
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.')
    {
        return Err("may contain only lower-case letters, digits, '.' and '-'".into());
    }
    let first_last_ok =
        |c: Option<u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !first_last_ok(b.bytes().next()) || !first_last_ok(b.bytes().last()) {
        return Err("must start and end with a letter or a digit".into());
    }
    if b.contains("..") {
        return Err("must not contain '..'".into());
    }
    if b.parse::<Ipv4Addr>().is_ok() {
        return Err("must not be formatted as an IP address".into());
    }
    Ok(())
}

fn validate_base_path(p: &str) -> Result<(), String> {
    if p.len() > 512 {
        return Err("must be at most 512 characters".into());
    }
    if p.starts_with('/') {
        return Err("must not start with '/': Elasticsearch treats it as part of the key".into());
    }
    if p.split('/').any(|seg| seg == ".." || seg == ".") {
        return Err("must not contain '.' or '..' segments".into());
    }
    if p.chars().any(|c| c.is_control() || c == '\\') {
        return Err("must not contain control characters or '\\'".into());
    }
    Ok(())
}

fn validate_region(r: &str) -> Result<(), String> {
    let ok = !r.is_empty()
        && r.len() <= 32
        && r.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    if ok {
        Ok(())
    } else {
        Err("must be a region name such as eu-central-1".into())
    }
}

fn validate_key_text(k: &str, max: usize) -> Result<(), String> {
    if k.is_empty() || k.len() > max {
        return Err(format!("must be 1 to {max} characters"));
    }
    if k.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain white space".into());
    }
    Ok(())
}

fn validate_chunk_size(c: &str) -> Result<(), String> {
    let bytes = parse_byte_size(c)?;
    // S3 multipart uploads cap an object at 5 TB; Elasticsearch refuses above.
    if bytes == 0 || bytes > 5 * 1024u64.pow(4) {
        return Err("must be between 1b and 5tb".into());
    }
    Ok(())
}

fn validate_location(l: &str) -> Result<(), String> {
    if l.is_empty() || l.len() > 512 {
        return Err("must be 1 to 512 characters".into());
    }
    if l.split('/').any(|seg| seg == "..") {
        return Err("must not contain '..'".into());
    }
    if l.chars().any(|c| c.is_control()) {
        return Err("must not contain control characters".into());
    }
    Ok(())
}

/// `host` or `host:port`, where host is a DNS name, an IPv4 address or a
/// bracketed IPv6 address.
/// What an endpoint names, once its syntax is checked.
enum EndpointHost {
    /// The platform's own store (local mode), allowed as it is.
    Trusted,
    /// A literal address, checked as it stands.
    Address(IpAddr),
    /// `localhost` or a `.localhost` name: loopback by definition.
    Loopback,
    /// A name for a metadata service, refused whatever it resolves to.
    Metadata,
    /// A DNS name (lower case) and the port, if one was given.
    Name(String, Option<u16>),
}

/// Reads an endpoint (`host` or `host:port`, no scheme) into what it names.
fn parse_endpoint(e: &str, policy: EndpointPolicy) -> Result<EndpointHost, String> {
    if e.contains("://") {
        return Err(
            "must be host or host:port without a scheme; set protocol to http or https".into(),
        );
    }
    if e.is_empty() || e.len() > 255 || e.contains('/') || e.chars().any(|c| c.is_whitespace()) {
        return Err("must be host or host:port, e.g. s3.example.com or 10.0.0.5:9000".into());
    }
    let (host, port) = split_host_port(e)?;
    let port = match port {
        None => None,
        // Written as digits without a leading zero: `019000` would be read
        // as 19000 by one parser and as another string by a comparison.
        Some(port) if port.starts_with('0') || !port.bytes().all(|b| b.is_ascii_digit()) => {
            return Err("port must be a number from 1 to 65535, without leading zeros".into());
        }
        Some(port) => match port.parse::<u16>() {
            Ok(p) if p > 0 => Some(p),
            _ => return Err("port must be a number from 1 to 65535".into()),
        },
    };
    // Only after the port's form is checked: an address that parses as the
    // trusted store must also be written as it.
    if policy
        .trusted
        .is_some_and(|t| e.parse::<std::net::SocketAddr>() == Ok(t))
    {
        return Ok(EndpointHost::Trusted);
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6
            .parse::<Ipv6Addr>()
            .map(|ip| EndpointHost::Address(IpAddr::V6(ip)))
            .map_err(|_| "is not a valid IPv6 address".to_string());
    }
    if inet_aton(host).is_some() && host.parse::<Ipv4Addr>().is_err() {
        // C resolvers read `0xa9fea9fe`, `0251.0376.0251.0376` or `169.254.43518`
        // as 169.254.169.254: only the canonical form can be checked honestly.
        return Err("IPv4 addresses must be written as four decimal numbers, e.g. 10.0.0.5".into());
    }
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return host
            .parse::<Ipv4Addr>()
            .map(|ip| EndpointHost::Address(IpAddr::V4(ip)))
            .map_err(|_| "is not a valid IPv4 address".to_string());
    }
    validate_hostname(host)?;
    let lower = host.to_ascii_lowercase();
    Ok(if lower == "localhost" || lower.ends_with(".localhost") {
        EndpointHost::Loopback
    } else if lower == "metadata.google.internal"
        || lower == "instance-data"
        || lower.starts_with("instance-data.")
    {
        EndpointHost::Metadata
    } else {
        EndpointHost::Name(lower, port)
    })
}

pub fn validate_endpoint(e: &str, policy: EndpointPolicy) -> Result<(), String> {
    match parse_endpoint(e, policy)? {
        EndpointHost::Trusted | EndpointHost::Name(..) => Ok(()),
        EndpointHost::Address(ip) => check_address(ip, policy),
        EndpointHost::Loopback if policy.allow_private => Ok(()),
        EndpointHost::Loopback => Err(private_refused()),
        EndpointHost::Metadata => Err("must not point at an instance metadata service".into()),
    }
}

/// The DNS name and port an endpoint names, when it names one (not an
/// address, not the platform's trusted store, not `localhost`): what the
/// use case must resolve before it may trust the endpoint.
pub fn endpoint_name(
    e: &str,
    protocol: Option<Protocol>,
    policy: EndpointPolicy,
) -> Option<(String, u16)> {
    let EndpointHost::Name(name, port) = parse_endpoint(e, policy).ok()? else {
        return None;
    };
    let default_port = match protocol {
        Some(Protocol::Http) => 80,
        _ => 443,
    };
    Some((name, port.unwrap_or(default_port)))
}

/// Checks the addresses a name resolved to: every one must be allowed, or
/// the name could lead a node to the one that is not.
pub fn check_resolved(
    name: &str,
    addresses: &[IpAddr],
    policy: EndpointPolicy,
) -> Result<(), String> {
    for ip in addresses {
        check_address(*ip, policy)
            .map_err(|m| format!("{name} resolves to {ip}: the endpoint {m}"))?;
    }
    Ok(())
}

fn private_refused() -> String {
    "points at a private or loopback address, which this platform is not configured to allow (FLOE_ALLOW_PRIVATE_ENDPOINTS)".into()
}

fn split_host_port(e: &str) -> Result<(&str, Option<&str>), String> {
    if e.starts_with('[') {
        match e.find(']') {
            Some(end) => {
                let rest = &e[end + 1..];
                if rest.is_empty() {
                    Ok((&e[..=end], None))
                } else if let Some(port) = rest.strip_prefix(':') {
                    Ok((&e[..=end], Some(port)))
                } else {
                    Err("must be [ipv6]:port".into())
                }
            }
            None => Err("has an unclosed '['".into()),
        }
    } else {
        match e.split_once(':') {
            Some((h, p)) if !p.contains(':') => Ok((h, Some(p))),
            Some(_) => {
                Err("IPv6 addresses must be written in brackets, e.g. [fd00::5]:9000".into())
            }
            None => Ok((e, None)),
        }
    }
}

/// The numeric host forms `inet_aton` accepts: one to four parts, each
/// decimal, octal (leading 0) or hexadecimal (leading 0x).
fn inet_aton(host: &str) -> Option<u32> {
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for p in &parts {
        let v = if let Some(hex) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
            if hex.is_empty() {
                Some(0)
            } else {
                u64::from_str_radix(hex, 16).ok()
            }
        } else if p.len() > 1 && p.starts_with('0') {
            u64::from_str_radix(&p[1..], 8).ok()
        } else if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
            p.parse::<u64>().ok()
        } else {
            None
        }?;
        values.push(v);
    }
    let (last, head) = values.split_last()?;
    if head.iter().any(|v| *v > 255) || *last >= 1u64 << (8 * (5 - values.len())) {
        return None;
    }
    let mut addr: u64 = 0;
    for (i, v) in head.iter().enumerate() {
        addr |= v << (24 - 8 * i);
    }
    u32::try_from(addr | last).ok()
}

fn validate_hostname(h: &str) -> Result<(), String> {
    let ok = !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if ok {
        Ok(())
    } else {
        Err("is not a valid host name".into())
    }
}

fn check_address(ip: IpAddr, policy: EndpointPolicy) -> Result<(), String> {
    let metadata_v4 = Ipv4Addr::new(169, 254, 169, 254);
    let (link_local, private, unspecified, multicast, metadata, reserved) = match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            (
                v4.is_link_local(),
                v4.is_private() || v4.is_loopback() || (a == 100 && (b & 0xc0) == 64),
                v4.is_unspecified() || v4.is_broadcast() || a == 0,
                v4.is_multicast(),
                v4 == metadata_v4,
                // Special-purpose ranges that are no S3 store's address:
                // IETF protocol assignments (192.0.0.0/24: NAT64 discovery,
                // DS-Lite), benchmarking (198.18.0.0/15) and the reserved
                // 240.0.0.0/4.
                (a == 192 && b == 0 && c == 0) || (a == 198 && (b & 0xfe) == 18) || a >= 240,
            )
        }
        IpAddr::V6(v6) => {
            let seg = v6.segments();
            // The EC2 metadata service's IPv6 address, fd00:ec2::254.
            let ec2_v6 = seg == [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254];
            // IPv4-mapped, IPv4-compatible and NAT64 addresses reach an IPv4
            // host; so do 6to4 (2002::/16, the IPv4 address in segments 1
            // and 2) and Teredo (2001::/32, the client's address inverted in
            // the last two segments).
            let v4_at = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
            let embedded = v4_at(seg[6], seg[7]);
            let compatible = seg[..6] == [0, 0, 0, 0, 0, 0] && u32::from(embedded) > 1;
            let nat64 = seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
            if let Some(v4) = v6.to_ipv4_mapped() {
                return check_address(IpAddr::V4(v4), policy);
            }
            if compatible || nat64 {
                return check_address(IpAddr::V4(embedded), policy);
            }
            if seg[0] == 0x2002 {
                return check_address(IpAddr::V4(v4_at(seg[1], seg[2])), policy);
            }
            if seg[0] == 0x2001 && seg[1] == 0 {
                return check_address(IpAddr::V4(v4_at(!seg[6], !seg[7])), policy);
            }
            (
                (seg[0] & 0xffc0) == 0xfe80,
                // Loopback, unique local (fc00::/7) and the deprecated
                // site-local fec0::/10, which some networks still route.
                v6.is_loopback() || (seg[0] & 0xfe00) == 0xfc00 || (seg[0] & 0xffc0) == 0xfec0,
                v6.is_unspecified(),
                v6.is_multicast(),
                ec2_v6,
                false,
            )
        }
    };
    if metadata {
        return Err("must not point at an instance metadata service".into());
    }
    if link_local {
        return Err("must not be a link-local address".into());
    }
    if unspecified || multicast {
        return Err("is not a unicast address".into());
    }
    if reserved {
        return Err("is a special-purpose address, not a storage endpoint".into());
    }
    if private && !policy.allow_private {
        return Err(private_refused());
    }
    Ok(())
}

impl Repository {
    /// Builds the stored form; the caller seals the secrets first, because
    /// sealing needs the cipher, which is I/O (KMS) and so not the domain's.
    pub fn s3_settings_from_request(
        req: &S3SettingsRequest,
        secret_key: Option<Sealed>,
        session_token: Option<Sealed>,
    ) -> S3Settings {
        S3Settings {
            bucket: req.bucket.clone(),
            base_path: req.base_path.clone(),
            region: req.region.clone(),
            endpoint: req.endpoint.clone(),
            protocol: req.protocol,
            path_style_access: req.path_style_access,
            access_key: req.access_key.clone(),
            secret_key,
            session_token,
            server_side_encryption: req.server_side_encryption,
            compress: req.compress,
            chunk_size: req.chunk_size.clone(),
            max_snapshot_bytes_per_sec: req.max_snapshot_bytes_per_sec.clone(),
            max_restore_bytes_per_sec: req.max_restore_bytes_per_sec.clone(),
            shared_across_organizations: req.shared_across_organizations,
        }
    }
}

/// The repository as a client sees it: credentials reduced to whether they are set.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RepositoryView {
    pub name: String,
    #[serde(rename = "type")]
    #[schema(example = "s3")]
    pub kind: String,
    pub settings: RepositorySettingsView,
    /// Deployments and policies that use this repository.
    pub used_by: u64,
    pub resource_version: u64,
    pub created: chrono::DateTime<chrono::Utc>,
    pub updated: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub enum RepositorySettingsView {
    S3(S3SettingsView),
    Fs(FsSettings),
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct S3SettingsView {
    pub bucket: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_style_access: Option<bool>,
    /// The access key id, masked: `****WXYZ`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_key: Option<String>,
    /// Whether a secret key is stored (it is never shown).
    pub secret_key_set: bool,
    /// Whether a session token is stored (it is never shown).
    pub session_token_set: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_side_encryption: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compress: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_snapshot_bytes_per_sec: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_restore_bytes_per_sec: Option<String>,
    /// Whether a platform admin let other organizations have repositories
    /// on this endpoint and bucket (see `sharing`); absent when not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_across_organizations: bool,
    /// What sharing allows, when the repository is shared.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(read_only)]
    pub sharing: Option<String>,
}

impl RepositoryView {
    pub fn new(repo: &Repository, version: u64, used_by: u64) -> RepositoryView {
        let (kind, settings) = match &repo.settings {
            RepositorySettings::S3(s) => (
                "s3",
                RepositorySettingsView::S3(S3SettingsView {
                    bucket: s.bucket.clone(),
                    base_path: s.base_path.clone(),
                    region: s.region.clone(),
                    endpoint: s.endpoint.clone(),
                    protocol: s.protocol,
                    path_style_access: s.path_style_access,
                    access_key: s.access_key.as_deref().map(mask_access_key),
                    secret_key_set: s.secret_key.is_some(),
                    session_token_set: s.session_token.is_some(),
                    server_side_encryption: s.server_side_encryption,
                    compress: s.compress,
                    chunk_size: s.chunk_size.clone(),
                    max_snapshot_bytes_per_sec: s.max_snapshot_bytes_per_sec.clone(),
                    max_restore_bytes_per_sec: s.max_restore_bytes_per_sec.clone(),
                    shared_across_organizations: s.shared_across_organizations,
                    sharing: s
                        .shared_across_organizations
                        .then(|| crate::bucket_claim::SHARING_MEANS.to_string()),
                }),
            ),
            RepositorySettings::Fs(f) => ("fs", RepositorySettingsView::Fs(f.clone())),
        };
        RepositoryView {
            name: repo.name.clone(),
            kind: kind.to_string(),
            settings,
            used_by,
            resource_version: version,
            created: repo.created,
            updated: repo.updated,
        }
    }
}

/// Repository names follow the platform's name rule.
pub fn validate_repository_name(name: &str) -> Result<(), String> {
    validate_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<RepositoryRequest, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn flashblade_body_is_accepted_as_is() {
        let body = r#"{"type":"s3","settings":{"max_restore_bytes_per_sec":"1gb","max_snapshot_bytes_per_sec":"150mb","access_key":"XXXXX","secret_key":"YYYYY","bucket":"elastic-snapshots","endpoint":"1.2.3.4","protocol":"http"}}"#;
        let req = parse(body).map_err(|e| e.to_string());
        assert!(req.is_ok(), "{req:?}");
        if let Ok(req) = req {
            assert_eq!(req.validate(EndpointPolicy::default()), Ok(()));
            assert!(!format!("{req:?}").contains("YYYYY"));
        }
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(parse(r#"{"type":"s3","settings":{"bucket":"abc","bukket":"x"}}"#).is_err());
        assert!(parse(r#"{"type":"s3","settings":{"bucket":"abc"},"extra":1}"#).is_err());
        assert!(parse(r#"{"type":"gcs","settings":{"bucket":"abc"}}"#).is_err());
    }

    #[test]
    fn endpoints() {
        let strict = EndpointPolicy::default();
        let open = EndpointPolicy {
            allow_private: true,
            ..EndpointPolicy::default()
        };
        // The platform's own store passes a strict policy, and only it.
        let local = EndpointPolicy {
            trusted: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 9000))),
            ..EndpointPolicy::default()
        };
        assert_eq!(validate_endpoint("127.0.0.1:9000", local), Ok(()));
        assert!(validate_endpoint("127.0.0.1:9001", local).is_err());
        assert!(validate_endpoint("127.0.0.1", local).is_err());
        assert!(validate_endpoint("127.0.0.1:09000", local).is_err());
        assert!(validate_endpoint("10.0.0.5:9000", local).is_err());
        // Only names go to the resolver, with the protocol's port unless one is given.
        for (endpoint, protocol, name) in [
            (
                "S3.Example.com",
                None,
                Some(("s3.example.com".to_string(), 443)),
            ),
            (
                "s3.example.com:9000",
                Some(Protocol::Http),
                Some(("s3.example.com".to_string(), 9000)),
            ),
            (
                "s3.example.com",
                Some(Protocol::Http),
                Some(("s3.example.com".to_string(), 80)),
            ),
            ("1.2.3.4", None, None),
            ("[2001:db8::1]:443", None, None),
            ("localhost:9000", None, None),
            ("127.0.0.1:9000", None, None),
            ("http://x", None, None),
        ] {
            assert_eq!(endpoint_name(endpoint, protocol, local), name, "{endpoint}");
        }
        for ok in [
            "1.2.3.4",
            "s3.example.com",
            "s3.example.com:9000",
            "[2001:db8::1]:443",
        ] {
            assert_eq!(validate_endpoint(ok, strict), Ok(()), "{ok}");
        }
        for bad in [
            "http://1.2.3.4",
            "169.254.169.254",
            "[fd00:ec2::254]",
            "169.254.1.1",
            "a b",
            "x/y",
            "1.2.3.4:0",
            "1.2.3.4:99999",
            "0.0.0.0",
            "[fe80::1]",
            "0xa9fea9fe",
            "0xa9.0xfe.0xa9.0xfe",
            "0x7f.1:9000",
            "0251.0376.0251.0376",
            "169.254.43518",
            "2852039166",
            "[::169.254.169.254]",
            "[64:ff9b::a9fe:a9fe]",
            // 6to4 and Teredo forms of the metadata address.
            "[2002:a9fe:a9fe::]",
            "[2001:0:4136:e378:8000:63bf:5601:5601]",
            // Special-purpose IPv4 ranges.
            "198.18.0.1",
            "198.19.255.254",
            "192.0.0.170",
            "240.0.0.1",
            // A port with a leading zero reads as another port.
            "127.0.0.1:019000",
            "s3.example.com:0443",
            "1.2.3.4:+443",
        ] {
            assert!(validate_endpoint(bad, open).is_err(), "{bad}");
        }
        for private in [
            "10.0.0.5",
            "127.0.0.1:9000",
            "192.168.1.1",
            "localhost:9000",
            "[::1]:9000",
            "[::ffff:10.0.0.1]",
            "[fec0::1]",
            "[2002:0a00:0001::]",
        ] {
            assert!(validate_endpoint(private, strict).is_err(), "{private}");
            assert_eq!(validate_endpoint(private, open), Ok(()), "{private}");
        }
    }

    #[test]
    fn all_problems_are_listed() {
        let req = parse(
            r#"{"type":"s3","settings":{"bucket":"A","max_snapshot_bytes_per_sec":"fast","chunk_size":"0","endpoint":"http://x"}}"#,
        );
        let Ok(req) = req else { panic!("parse") };
        let Err(Invalid(problems)) = req.validate(EndpointPolicy::default()) else {
            panic!("should fail")
        };
        let fields: Vec<_> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "settings.bucket",
                "settings.chunk_size",
                "settings.endpoint",
                "settings.max_snapshot_bytes_per_sec"
            ]
        );
    }
}
