//! The provider block: where the API is and the credential it takes.
//!
//! ```hcl
//! provider "floe" {
//!   endpoint = "https://floe.example.com"   # or FLOE_API_URL
//!   api_key  = var.floe_api_key             # or FLOE_API_KEY
//! }
//! ```

use crate::client::{Client, Credential};
use crate::common::{Configured, Num, Shared, Str};
use crate::schema::{block, number, optional, sensitive, string};
use crate::{data_sources, deployment, policy, repository};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Duration;
use tf_provider::schema::Schema;
use tf_provider::value::ValueEmpty;
use tf_provider::{AttributePath, Diagnostics, DynamicDataSource, DynamicResource, Provider};

#[derive(Default, Clone)]
pub struct FloeProvider {
    shared: Shared,
}

#[derive(Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Config {
    pub endpoint: Str,
    pub api_key: Str,
    pub token: Str,
    pub plan_timeout_seconds: Num,
}

/// An hour: a large deployment's rolling update takes minutes per node.
const DEFAULT_PLAN_TIMEOUT: u64 = 3600;

/// The first known, non-empty value of the attribute and the environment.
fn setting(value: &Str, env: &str) -> Option<String> {
    let given = |s: &String| !s.trim().is_empty();
    value
        .as_ref_option()
        .filter(|s| given(s))
        .cloned()
        .or_else(|| std::env::var(env).ok().filter(given))
}

#[async_trait]
impl Provider for FloeProvider {
    type Config<'a> = Config;
    type MetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: block(
                "Floe: Elasticsearch deployments, snapshot repositories and snapshot policies on AWS.",
                vec![
                    (
                        "endpoint",
                        optional(
                            string(),
                            "The API's base URL, such as `https://floe.example.com` or `http://127.0.0.1:8080` for local mode. Defaults to `FLOE_API_URL`.",
                        ),
                    ),
                    (
                        "api_key",
                        sensitive(optional(
                            string(),
                            "An API key (`floe auth key create`), sent as `Authorization: ApiKey`. Defaults to `FLOE_API_KEY`. The credential a pipeline should use.",
                        )),
                    ),
                    (
                        "token",
                        sensitive(optional(
                            string(),
                            "A bearer token from the platform's identity provider, instead of an API key. Defaults to `FLOE_TOKEN`.",
                        )),
                    ),
                    (
                        "plan_timeout_seconds",
                        optional(
                            number(),
                            "How long an apply waits for one of a deployment's plans (default 3600).",
                        ),
                    ),
                ],
                vec![],
            ),
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::Config<'a>) -> Option<()> {
        if config.api_key.is_value() && config.token.is_value() {
            diags.error_short("set one of api_key and token", AttributePath::new("token"));
        }
        if let Some(t) = config.plan_timeout_seconds.as_ref_option()
            && *t < 1
        {
            diags.error_short(
                "plan_timeout_seconds must be at least 1",
                AttributePath::new("plan_timeout_seconds"),
            );
        }
        Some(())
    }

    async fn configure<'a>(
        &self,
        diags: &mut Diagnostics,
        _terraform_version: String,
        config: Self::Config<'a>,
    ) -> Option<()> {
        let Some(endpoint) = setting(&config.endpoint, "FLOE_API_URL") else {
            diags.error(
                "no Floe endpoint",
                "set the provider's endpoint, or FLOE_API_URL",
                AttributePath::new("endpoint"),
            );
            return None;
        };
        let credential = match (
            setting(&config.api_key, "FLOE_API_KEY"),
            setting(&config.token, "FLOE_TOKEN"),
        ) {
            (Some(key), _) => Credential::ApiKey(key),
            (None, Some(token)) => Credential::Token(token),
            (None, None) => {
                diags.error(
                    "no Floe credential",
                    "set the provider's api_key (or FLOE_API_KEY), or a token (FLOE_TOKEN)",
                    AttributePath::new("api_key"),
                );
                return None;
            }
        };
        let client = match Client::new(&endpoint, credential) {
            Ok(c) => c,
            Err(e) => {
                diags.root_error_short(e);
                return None;
            }
        };
        let timeout = config
            .plan_timeout_seconds
            .as_ref_option()
            .and_then(|t| u64::try_from(*t).ok())
            .unwrap_or(DEFAULT_PLAN_TIMEOUT);
        // Terraform configures a provider once per run; a second configure
        // keeps the first settings.
        self.shared.set(Configured {
            client,
            plan_timeout: Duration::from_secs(timeout),
        });
        Some(())
    }

    // tf-provider names each `{provider}_{name}`: these are floe_deployment…
    fn get_resources(
        &self,
        _diags: &mut Diagnostics,
    ) -> Option<HashMap<String, Box<dyn DynamicResource>>> {
        let s = &self.shared;
        Some(HashMap::from([
            (
                "snapshot_repository".to_string(),
                Box::new(repository::RepositoryResource(s.clone())) as Box<dyn DynamicResource>,
            ),
            (
                "snapshot_policy".to_string(),
                Box::new(policy::PolicyResource(s.clone())),
            ),
            (
                "deployment".to_string(),
                Box::new(deployment::DeploymentResource(s.clone())),
            ),
        ]))
    }

    fn get_data_sources(
        &self,
        _diags: &mut Diagnostics,
    ) -> Option<HashMap<String, Box<dyn DynamicDataSource>>> {
        let s = &self.shared;
        Some(HashMap::from([
            (
                "deployment".to_string(),
                Box::new(data_sources::DeploymentData(s.clone())) as Box<dyn DynamicDataSource>,
            ),
            (
                "deployments".to_string(),
                Box::new(data_sources::DeploymentsData(s.clone())),
            ),
            (
                "instance_types".to_string(),
                Box::new(data_sources::InstanceTypesData(s.clone())),
            ),
            (
                "snapshot".to_string(),
                Box::new(data_sources::SnapshotData(s.clone())),
            ),
            (
                "drills".to_string(),
                Box::new(data_sources::DrillsData(s.clone())),
            ),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tf_provider::schema::{AttributeType, Block, NestedBlock};

    /// Every name a block declares: attributes, nested blocks and their
    /// attributes, and the fields of object-typed attributes.
    fn names(block: &Block, out: &mut Vec<String>) {
        fn of_type(t: &AttributeType, out: &mut Vec<String>) {
            match t {
                AttributeType::List(inner)
                | AttributeType::Set(inner)
                | AttributeType::Map(inner) => of_type(inner, out),
                AttributeType::Object(fields) => {
                    for (name, field) in fields {
                        out.push(name.clone());
                        of_type(field, out);
                    }
                }
                _ => {}
            }
        }
        for (name, attribute) in &block.attributes {
            out.push(name.clone());
            of_type(&attribute.attr_type, out);
        }
        for (name, nested) in &block.blocks {
            out.push(name.clone());
            let (NestedBlock::Single(b)
            | NestedBlock::List(b)
            | NestedBlock::Set(b)
            | NestedBlock::Map(b)
            | NestedBlock::Group(b)
            | NestedBlock::Optional(b)) = nested;
            names(b, out);
        }
    }

    fn page(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/terraform")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn undocumented(block: &Block, page_name: &str) -> Vec<String> {
        let text = page(page_name);
        let mut all = Vec::new();
        names(block, &mut all);
        all.sort();
        all.dedup();
        all.into_iter()
            .filter(|n| !text.contains(&format!("`{n}`")))
            .collect()
    }

    /// Each resource and data source has its page, naming every attribute.
    #[test]
    fn every_attribute_is_documented_on_its_page() {
        let provider = FloeProvider::default();
        let mut diags = Diagnostics::default();
        let mut missing = Vec::new();
        let provider_schema = provider.schema(&mut diags).expect("the provider's schema");
        for n in undocumented(&provider_schema.block, "provider.md") {
            missing.push(format!("provider: {n}"));
        }
        for (name, resource) in provider.get_resources(&mut diags).expect("resources") {
            let schema = resource.schema(&mut diags).expect("a schema");
            for n in undocumented(&schema.block, &format!("{name}.md")) {
                missing.push(format!("floe_{name}: {n}"));
            }
        }
        for (name, data) in provider.get_data_sources(&mut diags).expect("data sources") {
            let schema = data.schema(&mut diags).expect("a schema");
            for n in undocumented(&schema.block, &format!("data-{name}.md")) {
                missing.push(format!("data floe_{name}: {n}"));
            }
        }
        assert!(
            missing.is_empty(),
            "undocumented in docs/terraform: {missing:?}"
        );
    }
}
