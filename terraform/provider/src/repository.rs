//! `floe_snapshot_repository`: a repository of the platform (platform
//! admins only), by name. Keys are write-only in the API: the state keeps
//! what the configuration gave, and a read sees only whether one is set.

use crate::client::encode;
use crate::common::*;
use crate::schema::*;
use async_trait::async_trait;
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Map, json};
use tf_provider::schema::Schema;
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

pub struct RepositoryResource(pub Shared);

#[derive(Serialize, Deserialize, Default, Clone, PartialEq, Debug)]
#[serde(default)]
pub struct RepositoryState {
    pub id: Str,
    pub name: Str,
    #[serde(rename = "type")]
    pub kind: Str,
    pub bucket: Str,
    pub base_path: Str,
    pub region: Str,
    pub endpoint: Str,
    pub protocol: Str,
    pub path_style_access: Flag,
    pub access_key: Str,
    pub secret_key: Str,
    pub session_token: Str,
    pub server_side_encryption: Flag,
    pub compress: Flag,
    pub chunk_size: Str,
    pub max_snapshot_bytes_per_sec: Str,
    pub max_restore_bytes_per_sec: Str,
    pub shared_across_organizations: Flag,
    pub location: Str,
    pub resource_version: Num,
    pub used_by: Num,
}

fn path(name: &str) -> String {
    format!(
        "/api/v1/platform/configuration/snapshots/repositories/{}",
        encode(name)
    )
}

/// The API's `settings.bucket` is the resource's `bucket`.
fn locate(field: &str) -> Option<AttributePath> {
    let steps = field_steps(field);
    match steps.first() {
        Some(Step::Name(n)) if n == "settings" => {
            if steps.len() > 1 {
                Some(extend(AttributePath::root(), &steps[1..]))
            } else {
                None
            }
        }
        Some(Step::Name(n)) if n == "type" || n == "name" => Some(AttributePath::new(n.clone())),
        _ => None,
    }
}

impl RepositoryState {
    /// The request body of a create or replace.
    fn body(&self) -> serde_json::Value {
        let kind = self
            .kind
            .as_ref_option()
            .cloned()
            .unwrap_or_else(|| "s3".into());
        let mut s = Map::new();
        if kind == "fs" {
            put(&mut s, "location", json_str(&self.location));
        } else {
            put(&mut s, "bucket", json_str(&self.bucket));
            put(&mut s, "base_path", json_str(&self.base_path));
            put(&mut s, "region", json_str(&self.region));
            put(&mut s, "endpoint", json_str(&self.endpoint));
            put(&mut s, "protocol", json_str(&self.protocol));
            put(
                &mut s,
                "path_style_access",
                json_flag(&self.path_style_access),
            );
            put(&mut s, "access_key", json_str(&self.access_key));
            put(&mut s, "secret_key", json_str(&self.secret_key));
            put(&mut s, "session_token", json_str(&self.session_token));
            put(
                &mut s,
                "server_side_encryption",
                json_flag(&self.server_side_encryption),
            );
            put(&mut s, "chunk_size", json_str(&self.chunk_size));
            put(
                &mut s,
                "shared_across_organizations",
                json_flag(&self.shared_across_organizations),
            );
        }
        put(&mut s, "compress", json_flag(&self.compress));
        put(
            &mut s,
            "max_snapshot_bytes_per_sec",
            json_str(&self.max_snapshot_bytes_per_sec),
        );
        put(
            &mut s,
            "max_restore_bytes_per_sec",
            json_str(&self.max_restore_bytes_per_sec),
        );
        json!({ "type": kind, "settings": s })
    }

    /// The state a view gives, keeping from `prior` what the API never
    /// shows: the secret key and session token while the API says one is
    /// set, and the access key while its masked form still matches.
    fn from_view(view: &serde_json::Value, prior: &RepositoryState) -> RepositoryState {
        let s = &view["settings"];
        let name = str_of(&view["name"]);
        let kept = |set: &serde_json::Value, prior: &Str| match set.as_bool() {
            Some(true) => prior.clone(),
            _ => Value::Null,
        };
        let access_key = match (s["access_key"].as_str(), prior.access_key.as_ref_option()) {
            (Some(masked), Some(known))
                if masked.starts_with('*')
                    && known.len() >= 4
                    && masked.ends_with(&known[known.len() - 4..]) =>
            {
                prior.access_key.clone()
            }
            _ => str_of(&s["access_key"]),
        };
        RepositoryState {
            id: name.clone(),
            name,
            kind: str_of(&view["type"]),
            bucket: str_of(&s["bucket"]),
            base_path: str_of(&s["base_path"]),
            region: str_of(&s["region"]),
            endpoint: str_of(&s["endpoint"]),
            protocol: str_of(&s["protocol"]),
            path_style_access: flag_of(&s["path_style_access"]),
            access_key,
            secret_key: kept(&s["secret_key_set"], &prior.secret_key),
            session_token: kept(&s["session_token_set"], &prior.session_token),
            server_side_encryption: flag_of(&s["server_side_encryption"]),
            compress: flag_of(&s["compress"]),
            chunk_size: str_of(&s["chunk_size"]),
            max_snapshot_bytes_per_sec: str_of(&s["max_snapshot_bytes_per_sec"]),
            max_restore_bytes_per_sec: str_of(&s["max_restore_bytes_per_sec"]),
            // An fs repository has no such setting: the configuration's stands.
            shared_across_organizations: if view["type"] == "fs" {
                match prior.shared_across_organizations {
                    Value::Value(b) => Value::Value(b),
                    _ => Value::Value(false),
                }
            } else {
                Value::Value(s["shared_across_organizations"].as_bool().unwrap_or(false))
            },
            location: str_of(&s["location"]),
            resource_version: num_of(&view["resource_version"]),
            used_by: num_of(&view["used_by"]),
        }
    }

    /// Everything but the platform's own counters, to tell whether a plan
    /// changes anything.
    fn declared(&self) -> RepositoryState {
        RepositoryState {
            resource_version: Value::Null,
            used_by: Value::Null,
            ..self.clone()
        }
    }
}

async fn put_repository(
    shared: &Shared,
    diags: &mut Diagnostics,
    state: &RepositoryState,
    version: Option<i64>,
    doing: &str,
) -> Option<RepositoryState> {
    let configured = shared.get(diags)?;
    let name = state.name.as_ref_option()?.clone();
    match configured
        .client
        .call(Method::PUT, &path(&name), Some(&state.body()), version)
        .await
    {
        Ok(answer) => Some(RepositoryState::from_view(&answer.body, state)),
        Err(e) => {
            report(diags, doing, &e, locate);
            None
        }
    }
}

#[async_trait]
impl Resource for RepositoryResource {
    type State<'a> = RepositoryState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: block(
                "A snapshot repository of the platform, shared by the deployments that name it. Platform admins only. See docs/terraform/snapshot_repository.md.",
                vec![
                    ("id", computed(string(), "The repository's name.")),
                    (
                        "name",
                        required(
                            string(),
                            "DNS-safe name, also the name the clusters register it under. Changing it replaces the repository.",
                        ),
                    ),
                    (
                        "type",
                        defaulted(
                            string(),
                            "`s3` (default) or `fs` (a folder under the clusters' `path.repo`, local use).",
                        ),
                    ),
                    ("bucket", optional(string(), "`s3`: the bucket.")),
                    (
                        "base_path",
                        optional(string(), "`s3`: the key prefix inside the bucket."),
                    ),
                    ("region", optional(string(), "`s3`: the bucket's region.")),
                    (
                        "endpoint",
                        optional(
                            string(),
                            "`s3`: `host` or `host:port` of an S3-compatible store; no scheme (see `protocol`).",
                        ),
                    ),
                    (
                        "protocol",
                        optional(string(), "`s3`: `http` or `https` for `endpoint`."),
                    ),
                    (
                        "path_style_access",
                        optional(
                            bool(),
                            "`s3`: path-style addressing, as most S3-compatible stores need.",
                        ),
                    ),
                    (
                        "access_key",
                        optional(
                            string(),
                            "`s3`: an access key id; without keys the nodes use their instance role.",
                        ),
                    ),
                    (
                        "secret_key",
                        sensitive(optional(
                            string(),
                            "`s3`: the secret key. Write-only in the API: Terraform keeps what it sent, and a read sees only that one is set.",
                        )),
                    ),
                    (
                        "session_token",
                        sensitive(optional(
                            string(),
                            "`s3`: a session token; write-only like `secret_key`.",
                        )),
                    ),
                    (
                        "server_side_encryption",
                        optional(bool(), "`s3`: ask S3 to encrypt the objects."),
                    ),
                    (
                        "compress",
                        optional(bool(), "Compress the snapshots' metadata files."),
                    ),
                    (
                        "chunk_size",
                        optional(
                            string(),
                            "`s3`: the largest object a file is split into, such as `1gb`.",
                        ),
                    ),
                    (
                        "max_snapshot_bytes_per_sec",
                        optional(
                            string(),
                            "Throttle of snapshots per node, such as `150mb`; `0` for none.",
                        ),
                    ),
                    (
                        "max_restore_bytes_per_sec",
                        optional(
                            string(),
                            "Throttle of restores per node, such as `1gb`; `0` for none.",
                        ),
                    ),
                    (
                        "shared_across_organizations",
                        defaulted(
                            bool(),
                            "`s3`: let other organizations have repositories on the same endpoint and bucket (default false).",
                        ),
                    ),
                    (
                        "location",
                        optional(
                            string(),
                            "`fs`: the folder under the clusters' `path.repo`.",
                        ),
                    ),
                    (
                        "resource_version",
                        computed(
                            number(),
                            "The repository's version; updates and the delete send it (`If-Match`).",
                        ),
                    ),
                    (
                        "used_by",
                        computed(number(), "Deployments and policies that use it."),
                    ),
                ],
                vec![],
            ),
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        match config.kind.as_ref_option().map(String::as_str) {
            None | Some("s3") => {
                if config.bucket.is_null() {
                    diags.error_short(
                        "an s3 repository needs a bucket",
                        AttributePath::new("bucket"),
                    );
                }
            }
            Some("fs") => {
                if config.location.is_null() {
                    diags.error_short(
                        "an fs repository needs a location",
                        AttributePath::new("location"),
                    );
                }
            }
            Some(other) => diags.error(
                "unknown repository type",
                format!("`{other}`: the platform takes s3 or fs"),
                AttributePath::new("type"),
            ),
        }
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        state: Self::State<'a>,
        private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let configured = self.0.get(diags)?;
        let name = state
            .name
            .as_ref_option()
            .or(state.id.as_ref_option())?
            .clone();
        match configured.client.get_optional(&path(&name)).await {
            Ok(Some(view)) => Some((RepositoryState::from_view(&view, &state), private_state)),
            Ok(None) => None,
            Err(e) => {
                report(diags, "reading the repository", &e, locate);
                Some((state, private_state))
            }
        }
    }

    async fn plan_create<'a>(
        &self,
        _diags: &mut Diagnostics,
        proposed: Self::State<'a>,
        _config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let mut state = proposed;
        state.id = state.name.clone();
        if state.kind.is_null() {
            state.kind = Value::Value("s3".into());
        }
        if state.shared_across_organizations.is_null() {
            state.shared_across_organizations = Value::Value(false);
        }
        state.resource_version = Value::Unknown;
        state.used_by = Value::Unknown;
        Some((state, Default::default()))
    }

    async fn plan_update<'a>(
        &self,
        _diags: &mut Diagnostics,
        prior: Self::State<'a>,
        proposed: Self::State<'a>,
        _config: Self::State<'a>,
        prior_private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>, Vec<AttributePath>)> {
        let mut state = proposed;
        let mut replace = Vec::new();
        if state.name != prior.name {
            replace.push(AttributePath::new("name"));
            state.id = state.name.clone();
        }
        if state.kind.is_null() {
            state.kind = prior.kind.clone();
        }
        if state.shared_across_organizations.is_null() {
            state.shared_across_organizations = Value::Value(false);
        }
        if state.declared() != prior.declared() {
            state.resource_version = Value::Unknown;
            state.used_by = Value::Unknown;
        }
        Some((state, prior_private, replace))
    }

    async fn plan_destroy<'a>(
        &self,
        _diags: &mut Diagnostics,
        _prior: Self::State<'a>,
        prior_private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::PrivateState<'a>> {
        Some(prior_private)
    }

    async fn create<'a>(
        &self,
        diags: &mut Diagnostics,
        planned: Self::State<'a>,
        _config: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let configured = self.0.get(diags)?;
        let name = planned.name.as_ref_option()?.clone();
        // A PUT creates or replaces: one that exists already is imported,
        // never overwritten by a create.
        match configured.client.get_optional(&path(&name)).await {
            Ok(None) => {}
            Ok(Some(_)) => {
                diags.error(
                    "the repository exists already",
                    format!("import it: terraform import <address> {name}"),
                    AttributePath::new("name"),
                );
                return None;
            }
            Err(e) => {
                report(diags, "looking for the repository", &e, locate);
                return None;
            }
        }
        let state =
            put_repository(&self.0, diags, &planned, None, "creating the repository").await?;
        Some((state, private))
    }

    async fn update<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: Self::State<'a>,
        planned: Self::State<'a>,
        _config: Self::State<'a>,
        private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let version = prior.resource_version.as_ref_option().copied();
        let state =
            put_repository(&self.0, diags, &planned, version, "updating the repository").await?;
        Some((state, private))
    }

    async fn destroy<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: Self::State<'a>,
        _private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<()> {
        let configured = self.0.get(diags)?;
        let name = prior.name.as_ref_option()?.clone();
        let version = prior.resource_version.as_ref_option().copied();
        let doing = "deleting the repository";
        delete_at(configured, diags, &path(&name), version, doing, locate).await
    }

    async fn import<'a>(
        &self,
        _diags: &mut Diagnostics,
        id: String,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let state = RepositoryState {
            id: Value::Value(id.clone()),
            name: Value::Value(id),
            ..Default::default()
        };
        Some((state, Default::default()))
    }
}
