//! The SSM Parameter Store adapter of the node parameters port
//! (`floe_compute::parameters`): what a plan stores for the nodes it
//! launches, read by their boot script with the AWS CLI.
//!
//! This is the only crate that links `aws-sdk-ssm`.
//!
//! Every parameter is a standard-tier parameter: the values are small (ids,
//! credentials), and advanced parameters cost money each month. Plain values
//! are `String`s; secrets are `SecureString`s, encrypted with the configured
//! customer KMS key or else with the account's `aws/ssm` key.
//!
//! IAM: the worker's role needs [`OPERATIONS`] on `{prefix}/*`, and with a
//! customer key also [`KMS_ACTIONS`] on that key ([`IAM_ACTIONS`] is both).
//! The nodes' instance role needs `ssm:GetParameter` on its deployment's
//! path, and `kms:Decrypt` on the customer key if there is one.

mod error;

pub use error::{
    ACCESS_DENIED, INVALID_REQUEST, INVALID_RESPONSE, KMS_KEY_INVALID, QUOTA_EXCEEDED,
    REQUEST_FAILED, VERSION_LIMIT_EXCEEDED,
};

use async_trait::async_trait;
use aws_sdk_ssm::Client;
use aws_sdk_ssm::types::{ParameterTier, ParameterType};
use error::{SsmFailure, permanent};
use floe_compute::ComputeError;
use floe_compute::parameters::{
    NodeParameters, SecretOrPlain, check_name, check_path, check_value,
};

/// Every SDK operation this crate calls, as IAM actions.
pub const OPERATIONS: &[&str] = &[
    "ssm:PutParameter",
    "ssm:GetParameter",
    "ssm:DeleteParameter",
    "ssm:DeleteParameters",
    "ssm:GetParametersByPath",
];

/// What IAM checks on a customer KMS key without a call of this crate's own:
/// Parameter Store encrypts a `SecureString` with the caller's permission on
/// the key when it is put, and decrypts it with it when it is read. The
/// account's `aws/ssm` key needs neither.
pub const KMS_ACTIONS: &[&str] = &["kms:Encrypt", "kms:Decrypt"];

/// [`OPERATIONS`] and [`KMS_ACTIONS`]: everything the worker's role needs for
/// this crate when a customer key is configured.
pub const IAM_ACTIONS: &[&str] = &[
    "ssm:PutParameter",
    "ssm:GetParameter",
    "ssm:DeleteParameter",
    "ssm:DeleteParameters",
    "ssm:GetParametersByPath",
    "kms:Encrypt",
    "kms:Decrypt",
];

/// The largest page GetParametersByPath returns.
const PAGE_SIZE: i32 = 10;
/// The most names DeleteParameters takes at once.
const DELETE_BATCH: usize = 10;

const PARAMETER_NOT_FOUND: &str = "ParameterNotFound";
const TYPE_MISMATCH: &str = "HierarchyTypeMismatchException";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SsmParametersConfig {
    /// The KMS key (id, ARN or alias) that encrypts secrets; `None` means
    /// the account's `aws/ssm` key.
    pub kms_key_id: Option<String>,
}

/// The node parameters port on SSM Parameter Store.
#[derive(Clone)]
pub struct SsmParameters {
    client: Client,
    config: SsmParametersConfig,
}

// The client's configuration is left out: it holds the credentials provider.
impl std::fmt::Debug for SsmParameters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SsmParameters")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl SsmParameters {
    /// Builds the client from the process's shared SDK configuration
    /// (`AWS_REGION`, the function role's credentials, `AWS_ENDPOINT_URL`...).
    pub fn new(sdk: &aws_config::SdkConfig, config: SsmParametersConfig) -> SsmParameters {
        SsmParameters {
            client: Client::new(sdk),
            config,
        }
    }

    pub fn config(&self) -> &SsmParametersConfig {
        &self.config
    }

    async fn put_once(&self, name: &str, value: &SecretOrPlain) -> Result<(), SsmFailure> {
        let (kind, key) = match value {
            SecretOrPlain::Plain(_) => (ParameterType::String, None),
            SecretOrPlain::Secret(_) => {
                (ParameterType::SecureString, self.config.kms_key_id.clone())
            }
        };
        self.client
            .put_parameter()
            .name(name)
            .value(value.expose())
            .r#type(kind)
            .set_key_id(key)
            .overwrite(true)
            .tier(ParameterTier::Standard)
            .send()
            .await
            .map_err(|e| SsmFailure::from_sdk("PutParameter", name, &e))?;
        Ok(())
    }

    /// Every parameter name below `path` (which ends in `/`), at any depth.
    async fn names_under(&self, path: &str) -> Result<Vec<String>, ComputeError> {
        let mut names = Vec::new();
        let mut next_token: Option<String> = None;
        loop {
            let page = self
                .client
                .get_parameters_by_path()
                .path(path)
                .recursive(true)
                .max_results(PAGE_SIZE)
                .set_next_token(next_token.take())
                .send()
                .await
                .map_err(|e| {
                    SsmFailure::from_sdk("GetParametersByPath", path, &e).into_compute_error()
                })?;
            // Checked here too: whatever the service returns, a parameter
            // outside the path must never be deleted.
            names.extend(
                page.parameters()
                    .iter()
                    .filter_map(|p| p.name())
                    .filter(|n| n.starts_with(path))
                    .map(str::to_owned),
            );
            match page.next_token() {
                Some(token) if !token.is_empty() => next_token = Some(token.to_owned()),
                _ => return Ok(names),
            }
        }
    }
}

#[async_trait]
impl NodeParameters for SsmParameters {
    async fn put(&self, name: &str, value: &SecretOrPlain) -> Result<(), ComputeError> {
        check_name(name)?;
        check_value(name, value)?;
        match self.put_once(name, value).await {
            Ok(()) => {}
            Err(failure) if failure.code() == Some(TYPE_MISMATCH) => {
                // Parameter Store will not change a parameter's type in
                // place, and the port promises an overwrite: the parameter
                // is recreated. Nodes read a name with one type only, so none
                // reads it in the moment it is missing.
                self.delete(name).await?;
                self.put_once(name, value)
                    .await
                    .map_err(SsmFailure::into_compute_error)?;
            }
            Err(failure) => return Err(failure.into_compute_error()),
        }
        tracing::debug!(parameter = %name, secret = value.is_secret(), "parameter stored");
        Ok(())
    }

    async fn get(&self, name: &str) -> Result<Option<SecretOrPlain>, ComputeError> {
        check_name(name)?;
        let got = match self
            .client
            .get_parameter()
            .name(name)
            .with_decryption(true)
            .send()
            .await
        {
            Ok(got) => got,
            Err(e) => {
                let failure = SsmFailure::from_sdk("GetParameter", name, &e);
                if failure.code() == Some(PARAMETER_NOT_FOUND) {
                    return Ok(None);
                }
                return Err(failure.into_compute_error());
            }
        };
        let unusable = |what: &str| {
            permanent(
                INVALID_RESPONSE,
                format!("SSM GetParameter {name}: the answer has {what}"),
            )
        };
        let parameter = got.parameter().ok_or_else(|| unusable("no parameter"))?;
        let value = parameter.value().ok_or_else(|| unusable("no value"))?;
        match parameter.r#type() {
            Some(ParameterType::SecureString) => Ok(Some(SecretOrPlain::secret(value))),
            // A StringList is a String whose commas separate items; nothing
            // this crate writes is one, but it reads as its text.
            Some(ParameterType::String | ParameterType::StringList) => {
                Ok(Some(SecretOrPlain::plain(value)))
            }
            Some(other) => Err(unusable(&format!("the unknown type {}", other.as_str()))),
            None => Err(unusable("no type")),
        }
    }

    async fn delete(&self, name: &str) -> Result<(), ComputeError> {
        check_name(name)?;
        match self.client.delete_parameter().name(name).send().await {
            Ok(_) => {
                tracing::debug!(parameter = %name, "parameter deleted");
                Ok(())
            }
            Err(e) => {
                let failure = SsmFailure::from_sdk("DeleteParameter", name, &e);
                if failure.code() == Some(PARAMETER_NOT_FOUND) {
                    return Ok(());
                }
                Err(failure.into_compute_error())
            }
        }
    }

    async fn delete_under(&self, path: &str) -> Result<usize, ComputeError> {
        check_path(path)?;
        let below = format!("{}/", path.trim_end_matches('/'));
        // All names first, then the deletes: deleting while paging could
        // move parameters across page boundaries and skip some.
        let names = self.names_under(&below).await?;
        let mut deleted = 0;
        for batch in names.chunks(DELETE_BATCH) {
            let done = self
                .client
                .delete_parameters()
                .set_names(Some(batch.to_vec()))
                .send()
                .await
                .map_err(|e| {
                    SsmFailure::from_sdk("DeleteParameters", &below, &e).into_compute_error()
                })?;
            // Names reported invalid are already gone (deleted meanwhile),
            // which is what was asked.
            deleted += done.deleted_parameters().len();
        }
        tracing::info!(path = %below, deleted, "parameters deleted");
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn iam_actions_are_the_operations_and_the_kms_actions() {
        let all: BTreeSet<&str> = IAM_ACTIONS.iter().copied().collect();
        let parts: BTreeSet<&str> = OPERATIONS.iter().chain(KMS_ACTIONS).copied().collect();
        assert_eq!(all, parts);
        assert_eq!(IAM_ACTIONS.len(), OPERATIONS.len() + KMS_ACTIONS.len());
    }
}
