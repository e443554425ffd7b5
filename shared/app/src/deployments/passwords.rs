//! The `elastic` password of a deployment: sealed for its record, opened
//! again only to answer a create's retry.

use crate::{App, AppError};
use floe_domain::Code;
use floe_domain::access::{ELASTIC_USER, ElasticCredentials, PASSWORD_FIELD, sealing_resource};
use floe_secrets::{Owner, SecretError};

impl App {
    /// Seals a deployment's `elastic` password for its record.
    pub(crate) async fn seal_password(
        &self,
        org: &str,
        deployment_id: &str,
        password: &str,
    ) -> Result<String, AppError> {
        let resource = sealing_resource(deployment_id);
        self.cipher
            .seal(password, &password_owner(org, &resource))
            .await
            .map_err(secret_error)
    }

    pub(super) async fn open_password(
        &self,
        org: &str,
        deployment_id: &str,
        sealed: &str,
    ) -> Result<String, AppError> {
        let resource = sealing_resource(deployment_id);
        self.cipher
            .open(sealed, &password_owner(org, &resource))
            .await
            .map_err(secret_error)
    }
}

/// What a deployment's sealed password is bound to (`resource` is its
/// [`sealing_resource`]).
fn password_owner<'a>(org: &'a str, resource: &'a str) -> Owner<'a> {
    Owner {
        org,
        repository: resource,
        field: PASSWORD_FIELD,
    }
}

pub(super) fn credentials(password: &str) -> ElasticCredentials {
    ElasticCredentials {
        username: ELASTIC_USER.to_string(),
        password: password.to_string(),
    }
}

/// A key service that cannot be used right now is worth a retry; any other
/// failure is logged and answered as internal (it carries no user input).
fn secret_error(e: SecretError) -> AppError {
    match e {
        SecretError::KeyUnavailable(m) => {
            tracing::error!(error = %m, "the key service is unavailable");
            AppError::Unavailable {
                code: Code::INTERNAL_SECRETS_UNAVAILABLE,
                message: "the key service is unavailable; nothing was stored, retry later".into(),
            }
        }
        other => {
            tracing::error!(error = %other, "sealing or opening a deployment password failed");
            AppError::Internal
        }
    }
}
