use std::fmt;

use serde::{Deserialize, Serialize};

/// ECE's four roles. The wire names are the snake_case strings a token's
/// `roles` claim carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    PlatformAdmin,
    PlatformViewer,
    DeploymentManager,
    DeploymentViewer,
}

impl Role {
    pub const ALL: [Role; 4] = [
        Role::PlatformAdmin,
        Role::PlatformViewer,
        Role::DeploymentManager,
        Role::DeploymentViewer,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::PlatformAdmin => "platform_admin",
            Role::PlatformViewer => "platform_viewer",
            Role::DeploymentManager => "deployment_manager",
            Role::DeploymentViewer => "deployment_viewer",
        }
    }

    /// Exact match on the wire name: role strings come from tokens, and a
    /// lenient match would let a typo in an identity provider grant access.
    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|role| role.as_str() == s)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who is calling, after verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's `iss`: a `sub` is unique only within its issuer.
    pub issuer: String,
    pub subject: String,
    pub org: String,
    pub roles: Vec<Role>,
}

impl Principal {
    fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    /// Platform roles may act on every organization, not only their own.
    pub fn is_platform(&self) -> bool {
        self.has(Role::PlatformAdmin) || self.has(Role::PlatformViewer)
    }

    pub fn can_read(&self) -> bool {
        !self.roles.is_empty()
    }

    pub fn can_manage_deployments(&self) -> bool {
        self.has(Role::PlatformAdmin) || self.has(Role::DeploymentManager)
    }

    pub fn can_manage_platform(&self) -> bool {
        self.has(Role::PlatformAdmin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(roles: &[Role]) -> Principal {
        Principal {
            issuer: "floe-local".into(),
            subject: "alice".into(),
            org: "acme".into(),
            roles: roles.to_vec(),
        }
    }

    #[test]
    fn wire_names_round_trip() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
            assert_eq!(role.to_string(), role.as_str());
            let json = serde_json::to_string(&role).expect("a role serialises");
            assert_eq!(json, format!("\"{}\"", role.as_str()));
            assert_eq!(
                serde_json::from_str::<Role>(&json).expect("a role parses"),
                role
            );
        }
    }

    #[test]
    fn parse_is_exact() {
        assert_eq!(Role::parse("Platform_Admin"), None);
        assert_eq!(Role::parse(" platform_admin"), None);
        assert_eq!(Role::parse("platform-admin"), None);
        assert_eq!(Role::parse(""), None);
    }

    #[test]
    fn permission_helpers() {
        let admin = principal(&[Role::PlatformAdmin]);
        assert!(admin.is_platform());
        assert!(admin.can_read());
        assert!(admin.can_manage_deployments());
        assert!(admin.can_manage_platform());

        let platform_viewer = principal(&[Role::PlatformViewer]);
        assert!(platform_viewer.is_platform());
        assert!(platform_viewer.can_read());
        assert!(!platform_viewer.can_manage_deployments());
        assert!(!platform_viewer.can_manage_platform());

        let manager = principal(&[Role::DeploymentManager]);
        assert!(!manager.is_platform());
        assert!(manager.can_read());
        assert!(manager.can_manage_deployments());
        assert!(!manager.can_manage_platform());

        let viewer = principal(&[Role::DeploymentViewer]);
        assert!(!viewer.is_platform());
        assert!(viewer.can_read());
        assert!(!viewer.can_manage_deployments());
        assert!(!viewer.can_manage_platform());

        let nobody = principal(&[]);
        assert!(!nobody.is_platform());
        assert!(!nobody.can_read());
        assert!(!nobody.can_manage_deployments());
        assert!(!nobody.can_manage_platform());

        let mixed = principal(&[Role::PlatformViewer, Role::DeploymentManager]);
        assert!(mixed.is_platform());
        assert!(mixed.can_manage_deployments());
        assert!(!mixed.can_manage_platform());
    }
}
