//! Who is asking, and what they may do. A use case takes one of the
//! capability types ([`Reader`], [`Manager`], [`Admin`]), which only the
//! checks here hand out, so every entry point enforces the same rule.

use crate::AppError;
use floe_auth::Role;
use std::ops::Deref;

/// A verified caller acting in one organization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The organization the request acts in (the token's own, or the one a
    /// platform role picked).
    pub org: String,
    /// The token's subject; plans record it as their author.
    pub subject: String,
    /// The token's issuer and its own organization (which `org` differs
    /// from when a platform role acts in another one): with `subject`,
    /// they name the person. A `sub` is unique only within one issuer
    /// and organization, so whatever is kept per person (an idempotency
    /// key's request) is kept under all three.
    pub issuer: String,
    pub token_org: String,
    pub roles: Vec<Role>,
    /// The id of the API key the request came with; `None` for a token.
    pub api_key: Option<String>,
}

macro_rules! capability {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name(Caller);

        impl Deref for $name {
            type Target = Caller;
            fn deref(&self) -> &Caller {
                &self.0
            }
        }
    };
}

capability!(
    /// May read everything in the organization.
    Reader
);
capability!(
    /// May create, change and remove deployments and snapshot policies.
    Manager
);
capability!(
    /// May change the platform's configuration (snapshot repositories).
    Admin
);

/// The roles each capability takes, stated once: the checks below use them,
/// and the OpenAPI document names them per operation (`x-floe-roles`), from
/// which the authorisation matrix test is generated.
pub const READ_ROLES: [Role; 4] = Role::ALL;
/// See [`READ_ROLES`].
pub const MANAGE_ROLES: [Role; 2] = [Role::PlatformAdmin, Role::DeploymentManager];
/// See [`READ_ROLES`].
pub const ADMIN_ROLES: [Role; 1] = [Role::PlatformAdmin];

impl Caller {
    fn has_any(&self, roles: &[Role]) -> bool {
        self.roles.iter().any(|r| roles.contains(r))
    }

    pub fn reader(&self) -> Result<Reader, AppError> {
        if !self.has_any(&READ_ROLES) {
            return Err(AppError::Forbidden("this token has no role that may read"));
        }
        Ok(Reader(self.clone()))
    }

    pub fn manager(&self) -> Result<Manager, AppError> {
        if self.has_any(&MANAGE_ROLES) {
            Ok(Manager(self.clone()))
        } else {
            Err(AppError::Forbidden(
                "this needs the deployment_manager or platform_admin role",
            ))
        }
    }

    pub fn admin(&self) -> Result<Admin, AppError> {
        if self.has_any(&ADMIN_ROLES) {
            Ok(Admin(self.clone()))
        } else {
            Err(AppError::Forbidden("this needs the platform_admin role"))
        }
    }
}

impl Manager {
    /// The platform itself acting on a schedule the organization set up
    /// (a drill schedule): it does what the schedule says, in that
    /// organization only.
    pub(crate) fn for_schedule(org: &str) -> Manager {
        Manager(Caller {
            org: org.to_string(),
            subject: crate::scheduled::DRILL_SCHEDULE_SUBJECT.to_string(),
            issuer: "floe".to_string(),
            token_org: org.to_string(),
            roles: vec![Role::DeploymentManager],
            api_key: None,
        })
    }
}

/// Whoever may change deployments may read them.
impl From<&Manager> for Reader {
    fn from(m: &Manager) -> Reader {
        Reader(m.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(roles: &[Role]) -> Caller {
        Caller {
            org: "acme".into(),
            subject: "alice".into(),
            issuer: "floe-local".into(),
            token_org: "acme".into(),
            roles: roles.to_vec(),
            api_key: None,
        }
    }

    #[test]
    fn each_capability_needs_its_roles() {
        assert!(caller(&[]).reader().is_err());
        assert!(caller(&[Role::DeploymentViewer]).reader().is_ok());
        assert!(caller(&[Role::DeploymentViewer]).manager().is_err());
        assert!(caller(&[Role::DeploymentManager]).manager().is_ok());
        assert!(caller(&[Role::PlatformAdmin]).manager().is_ok());
        assert!(caller(&[Role::DeploymentManager]).admin().is_err());
        assert!(caller(&[Role::PlatformViewer]).admin().is_err());
        assert!(caller(&[Role::PlatformAdmin]).admin().is_ok());
    }
}
