//! The node parameters port: bootstrap data a plan stores for the nodes it
//! launches, which they read at boot. SSM Parameter Store implements it in
//! production (`floe-parameters-ssm`, the only crate that links
//! `aws-sdk-ssm`); `floe-compute-sim` simulates it for local mode and
//! tests.
//!
//! A deployment's parameters live under one path,
//! `{prefix}/{deployment_id}` ([`deployment_path`]), so that they can be
//! written one by one and removed all at once when the deployment goes. The
//! names under it are those the boot script of `floe-nodeconfig` reads.
//!
//! Every operation is idempotent, like the compute port's: `put` overwrites,
//! deleting what is gone succeeds.

use crate::ComputeError;
use async_trait::async_trait;
use floe_domain::secret::SecretString;

/// The comma-separated instance ids of a new cluster's first
/// master-eligible nodes (a `String`); see [`initial_master_nodes`].
pub const INITIAL_MASTER_NODES: &str = "initial_master_nodes";
/// The snapshot repository's credentials (`SecureString`s), piped by the
/// boot script into the keystore. The session token only exists for
/// temporary credentials.
pub const REPOSITORY_ACCESS_KEY: &str = "repository/access_key";
pub const REPOSITORY_SECRET_KEY: &str = "repository/secret_key";
pub const REPOSITORY_SESSION_TOKEN: &str = "repository/session_token";

/// The deployment's own CA certificate (a `String`: public), and the
/// certificate and key every node presents (`SecureString`s), written by
/// the create plan (`floe-node-security`); the boot script copies them
/// into `config/certs/`.
pub const TLS_CA_CERT: &str = "tls/ca.crt";
pub const TLS_NODE_CERT: &str = "tls/node.crt";
pub const TLS_NODE_KEY: &str = "tls/node.key";
/// The deployment's CA key (a `SecureString`), which only that
/// deployment's nodes (and the control plane) may read: each node signs
/// with it a certificate of its own for HTTP, naming its own addresses, so
/// that a client sniffing `_nodes/http` verifies every node it finds.
/// Deployments created before it was kept have none; their nodes serve
/// the shared certificate for HTTP too.
/// Deployments created before it was kept, and moved to a stable endpoint
/// since, hold here the key of their HTTP CA ([`TLS_HTTP_CA_CERT`]).
pub const TLS_CA_KEY: &str = "tls/ca.key";
/// The CA of the HTTP layer alone (a `String`: public), present only for a
/// deployment whose create kept no CA key and that moved to a stable
/// endpoint: its nodes sign their HTTP certificates with this CA (whose
/// key is [`TLS_CA_KEY`]), while transport keeps the deployment's CA,
/// which the nodes still running trust. [`TLS_CA_CERT`] then holds both
/// (the deployment's first), so that whoever trusts it trusts every node.
/// Without it, the deployment's CA signs both layers.
pub const TLS_HTTP_CA_CERT: &str = "tls/http-ca.crt";
/// The `elastic` user's password (`SecureString`): the nodes' keystore
/// `bootstrap.password`, and what the functions authenticate with.
pub const ELASTIC_PASSWORD: &str = "security/elastic_password";

/// Parameter Store's limits for standard parameters, checked before any call
/// so that the simulated and the real store refuse the same requests.
pub const MAX_VALUE_BYTES: usize = 4096;
pub const MAX_NAME_CHARS: usize = 1011;
pub const MAX_LEVELS: usize = 15;

/// The failure type of a name, path or value Parameter Store would refuse.
pub const INVALID_PARAMETER: &str = "invalid_parameter";

/// A parameter's value. Which variant decides how it is stored: a secret is
/// encrypted at rest (SSM `SecureString`), a plain value is not (`String`).
/// `Debug` never shows a secret (it is a [`SecretString`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretOrPlain {
    Plain(String),
    Secret(SecretString),
}

impl SecretOrPlain {
    pub fn plain(value: impl Into<String>) -> SecretOrPlain {
        SecretOrPlain::Plain(value.into())
    }

    pub fn secret(value: impl Into<String>) -> SecretOrPlain {
        SecretOrPlain::Secret(SecretString::new(value))
    }

    pub fn is_secret(&self) -> bool {
        matches!(self, SecretOrPlain::Secret(_))
    }

    /// The value as stored; for a secret, the plaintext. Named like
    /// [`SecretString::expose`] so that every use is easy to find.
    pub fn expose(&self) -> &str {
        match self {
            SecretOrPlain::Plain(v) => v,
            SecretOrPlain::Secret(s) => s.expose(),
        }
    }
}

#[async_trait]
pub trait NodeParameters: Send + Sync + 'static {
    /// Stores `value` under `name`, replacing whatever value (or type) the
    /// parameter had.
    async fn put(&self, name: &str, value: &SecretOrPlain) -> Result<(), ComputeError>;
    /// The parameter's value, decrypted if it is a secret; `None` if there is
    /// no such parameter.
    async fn get(&self, name: &str) -> Result<Option<SecretOrPlain>, ComputeError>;
    /// Deletes the parameter; succeeds if it is already gone.
    async fn delete(&self, name: &str) -> Result<(), ComputeError>;
    /// Deletes every parameter below `path` (at any depth; not a parameter
    /// named `path` itself, nor `{path}x/...`) and returns how many it
    /// deleted. After a failure some may be gone: calling again finishes.
    async fn delete_under(&self, path: &str) -> Result<usize, ComputeError>;
}

/// The path of a deployment's parameters: the boot script's
/// `parameter_prefix`.
pub fn deployment_path(prefix: &str, deployment_id: &str) -> String {
    format!("{}/{deployment_id}", prefix.trim_end_matches('/'))
}

/// The full name of parameter `name` (such as [`INITIAL_MASTER_NODES`])
/// under a deployment's path.
pub fn parameter_name(deployment_path: &str, name: &str) -> String {
    format!("{}/{name}", deployment_path.trim_end_matches('/'))
}

/// The value of [`INITIAL_MASTER_NODES`]. The boot script refuses anything
/// but `i-...` ids joined by commas (and then fails the node's boot), so the
/// same rule is applied here, where the plan can still report it.
pub fn initial_master_nodes<S: AsRef<str>>(ids: &[S]) -> Result<SecretOrPlain, ComputeError> {
    if ids.is_empty() {
        return Err(invalid("initial master nodes: no instance id".into()));
    }
    for id in ids {
        let id = id.as_ref();
        let valid = id.strip_prefix("i-").is_some_and(|rest| {
            !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric())
        });
        if !valid {
            return Err(invalid(format!(
                "initial master nodes: {id:?} is not an instance id"
            )));
        }
    }
    let joined: Vec<&str> = ids.iter().map(AsRef::as_ref).collect();
    Ok(SecretOrPlain::Plain(joined.join(",")))
}

fn invalid(message: String) -> ComputeError {
    ComputeError::Permanent {
        failure_type: INVALID_PARAMETER.to_owned(),
        message,
    }
}

/// Refuses a name Parameter Store would refuse: characters other than
/// `a-zA-Z0-9_.-/`, a hierarchy not starting with `/`, an empty level, more
/// than [`MAX_LEVELS`] levels, a name starting with `aws` or `ssm` (reserved,
/// in any case), more than [`MAX_NAME_CHARS`] characters.
pub fn check_name(name: &str) -> Result<(), ComputeError> {
    check_hierarchy("parameter name", name)?;
    if name.ends_with('/') {
        return Err(invalid(format!("parameter name {name:?} ends with '/'")));
    }
    Ok(())
}

/// Refuses a path [`NodeParameters::delete_under`] cannot take: as
/// [`check_name`], and it must start with `/` (a trailing `/` is fine).
pub fn check_path(path: &str) -> Result<(), ComputeError> {
    if !path.starts_with('/') {
        return Err(invalid(format!(
            "parameter path {path:?} does not start with '/'"
        )));
    }
    if path == "/" {
        return Ok(());
    }
    check_hierarchy("parameter path", path.trim_end_matches('/'))
}

fn check_hierarchy(what: &str, name: &str) -> Result<(), ComputeError> {
    if name.is_empty() {
        return Err(invalid(format!("{what} is empty")));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(invalid(format!(
            "{what} is longer than {MAX_NAME_CHARS} characters"
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/')))
    {
        return Err(invalid(format!("{what} {name:?} contains {c:?}")));
    }
    let relative = match name.strip_prefix('/') {
        Some(rest) => rest,
        None if name.contains('/') => {
            return Err(invalid(format!(
                "{what} {name:?} is a hierarchy that does not start with '/'"
            )));
        }
        None => name,
    };
    let levels: Vec<&str> = relative.split('/').collect();
    if levels.iter().any(|l| l.is_empty()) {
        return Err(invalid(format!("{what} {name:?} has an empty level")));
    }
    if levels.len() > MAX_LEVELS {
        return Err(invalid(format!(
            "{what} {name:?} has more than {MAX_LEVELS} levels"
        )));
    }
    let lowered = relative.to_ascii_lowercase();
    if lowered.starts_with("aws") || lowered.starts_with("ssm") {
        return Err(invalid(format!(
            "{what} {name:?} starts with the reserved \"aws\" or \"ssm\""
        )));
    }
    Ok(())
}

/// Refuses a value Parameter Store would refuse: empty, or larger than a
/// standard parameter holds. The message never contains the value.
pub fn check_value(name: &str, value: &SecretOrPlain) -> Result<(), ComputeError> {
    let len = value.expose().len();
    if len == 0 {
        return Err(invalid(format!("the value of {name} is empty")));
    }
    if len > MAX_VALUE_BYTES {
        return Err(invalid(format!(
            "the value of {name} has {len} bytes, more than {MAX_VALUE_BYTES}"
        )));
    }
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::*;

    fn failure_type(result: Result<impl std::fmt::Debug, ComputeError>) -> String {
        match result {
            Err(ComputeError::Permanent { failure_type, .. }) => failure_type,
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn a_secret_is_never_debug_printed() {
        let secret = SecretOrPlain::secret("wJalrXUtnFEMI-K7MDENG");
        let shown = format!("{secret:?} {:?}", Some(&secret));
        assert!(!shown.contains("wJalr"), "{shown}");
        assert!(secret.is_secret());
        assert_eq!(secret.expose(), "wJalrXUtnFEMI-K7MDENG");
        let plain = SecretOrPlain::plain("i-1,i-2");
        assert!(format!("{plain:?}").contains("i-1,i-2"));
        assert!(!plain.is_secret());
    }

    #[test]
    fn names_join_the_prefix_as_the_boot_script_does() {
        let path = deployment_path("/floe/", "dep-1");
        assert_eq!(path, "/floe/dep-1");
        assert_eq!(
            parameter_name(&path, REPOSITORY_SECRET_KEY),
            "/floe/dep-1/repository/secret_key"
        );
        assert_eq!(
            parameter_name("/floe/dep-1/", INITIAL_MASTER_NODES),
            "/floe/dep-1/initial_master_nodes"
        );
    }

    #[test]
    fn initial_master_nodes_are_instance_ids_joined_by_commas() -> Result<(), ComputeError> {
        let value = initial_master_nodes(&["i-0abc", "i-1DEF", "i-2"])?;
        assert_eq!(value, SecretOrPlain::plain("i-0abc,i-1DEF,i-2"));
        let bads: [&[&str]; 5] = [&[], &["i-"], &["node-1"], &["i-1", "i-2,i-3"], &["i-a b"]];
        for bad in bads {
            assert_eq!(
                failure_type(initial_master_nodes(bad)),
                INVALID_PARAMETER,
                "{bad:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn names_and_paths_follow_parameter_store_rules() {
        for ok in [
            "/floe/dep-1/initial_master_nodes",
            "/floe/dep-1/repository/access_key",
            "plain_name",
            "a.b-c_d",
            "/x/awsome",
        ] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        let deep = format!("/{}", vec!["l"; MAX_LEVELS + 1].join("/"));
        let deepest = format!("/{}", vec!["l"; MAX_LEVELS].join("/"));
        assert_eq!(check_name(&deepest), Ok(()));
        let long = format!("/{}", "x".repeat(MAX_NAME_CHARS));
        for bad in [
            "",
            "floe/dep-1",
            "/floe//x",
            "/floe/x/",
            "/floe/a b",
            "/floe/é",
            "/aws/x",
            "/SSM/x",
            "awsx",
            deep.as_str(),
            long.as_str(),
        ] {
            assert_eq!(failure_type(check_name(bad)), INVALID_PARAMETER, "{bad:?}");
        }
        for ok in ["/", "/floe", "/floe/", "/floe/dep-1"] {
            assert_eq!(check_path(ok), Ok(()), "{ok}");
        }
        for bad in ["", "floe", "floe/dep-1", "//", "/aws"] {
            assert_eq!(failure_type(check_path(bad)), INVALID_PARAMETER, "{bad:?}");
        }
    }

    #[test]
    fn values_must_fit_a_standard_parameter_and_errors_hide_them() {
        let largest = SecretOrPlain::secret("s".repeat(MAX_VALUE_BYTES));
        assert_eq!(check_value("/p", &largest), Ok(()));
        let too_large = SecretOrPlain::secret("s".repeat(MAX_VALUE_BYTES + 1));
        let err = check_value("/p", &too_large).err();
        assert!(
            matches!(&err, Some(ComputeError::Permanent { message, .. }) if !message.contains("sss")),
            "{err:?}"
        );
        assert_eq!(
            failure_type(check_value("/p", &SecretOrPlain::plain(""))),
            INVALID_PARAMETER
        );
    }
}
