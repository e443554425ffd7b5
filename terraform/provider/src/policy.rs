//! `floe_snapshot_policy`: when a deployment's cluster takes snapshots, into
//! which repository, and how many it keeps (SLM retention).

use crate::client::encode;
use crate::common::*;
use crate::schema::*;
use async_trait::async_trait;
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::Map;
use tf_provider::schema::{NestedBlock, Schema};
use tf_provider::value::{Value, ValueEmpty, serde_as_vec};
use tf_provider::{AttributePath, Diagnostics, Resource};

pub struct PolicyResource(pub Shared);

#[derive(Serialize, Deserialize, Default, Clone, PartialEq, Debug)]
#[serde(default)]
pub struct Schedule {
    pub interval: Str,
    pub cron: Str,
    pub timezone: Str,
}

#[derive(Serialize, Deserialize, Default, Clone, PartialEq, Debug)]
#[serde(default)]
pub struct Retention {
    pub expire_after: Str,
    pub min_count: Num,
    pub max_count: Num,
}

#[derive(Serialize, Deserialize, Default, Clone, PartialEq, Debug)]
#[serde(default)]
pub struct PolicyState {
    pub id: Str,
    pub name: Str,
    pub snapshot_name: Str,
    pub repository: Str,
    pub indices: StrList,
    pub include_global_state: Flag,
    pub enabled: Flag,
    pub schedule: Value<Schedule>,
    #[serde(with = "serde_as_vec")]
    pub retention: Value<Retention>,
    pub schedule_expression: Str,
    pub attached_deployments: Num,
    pub resource_version: Num,
}

fn path(id: &str) -> String {
    format!("/api/v1/snapshot-policies/{}", encode(id))
}

/// The API's fields are the resource's, but `retention` is a block of at
/// most one (a list in Terraform's paths).
fn locate(field: &str) -> Option<AttributePath> {
    let steps = field_steps(field);
    match steps.first() {
        Some(Step::Name(n)) if n == "retention" => Some(extend(
            AttributePath::new("retention").index(0),
            &steps[1..],
        )),
        Some(Step::Name(_)) => Some(extend(AttributePath::root(), &steps)),
        _ => None,
    }
}

impl PolicyState {
    fn body(&self) -> serde_json::Value {
        let mut b = Map::new();
        put(&mut b, "name", json_str(&self.name));
        put(&mut b, "snapshot_name", json_str(&self.snapshot_name));
        put(&mut b, "repository", json_str(&self.repository));
        put(&mut b, "indices", json_list(&self.indices));
        put(
            &mut b,
            "include_global_state",
            json_flag(&self.include_global_state),
        );
        put(&mut b, "enabled", json_flag(&self.enabled));
        let mut schedule = Map::new();
        if let Some(s) = self.schedule.as_ref_option() {
            put(&mut schedule, "interval", json_str(&s.interval));
            put(&mut schedule, "cron", json_str(&s.cron));
            put(&mut schedule, "timezone", json_str(&s.timezone));
        }
        b.insert("schedule".into(), schedule.into());
        if let Some(r) = self.retention.as_ref_option() {
            let mut retention = Map::new();
            put(&mut retention, "expire_after", json_str(&r.expire_after));
            put(&mut retention, "min_count", json_num(&r.min_count));
            put(&mut retention, "max_count", json_num(&r.max_count));
            b.insert("retention".into(), retention.into());
        }
        b.into()
    }

    /// The state a view gives. What the configuration left out and the
    /// platform answers empty (no indices) stays as the configuration had it.
    fn from_view(view: &serde_json::Value, prior: &PolicyState) -> PolicyState {
        let schedule = &view["schedule"];
        let indices = match view["indices"].as_array() {
            Some(list) if list.is_empty() && !prior.indices.is_value() => Value::Null,
            _ => list_of(&view["indices"]),
        };
        let prior_timezone = prior
            .schedule
            .as_ref_option()
            .map(|s| s.timezone.clone())
            .unwrap_or_default();
        let timezone = match schedule["timezone"].as_str() {
            // The platform may name the default zone a configuration left out.
            Some("UTC") if prior_timezone.is_null() => Value::Null,
            _ => str_of(&schedule["timezone"]),
        };
        let r = &view["retention"];
        let retention = match r.is_object() {
            true => Value::Value(Retention {
                expire_after: str_of(&r["expire_after"]),
                min_count: num_of(&r["min_count"]),
                max_count: num_of(&r["max_count"]),
            }),
            false => Value::Null,
        };
        PolicyState {
            id: str_of(&view["id"]),
            name: str_of(&view["name"]),
            snapshot_name: str_of(&view["snapshot_name"]),
            repository: str_of(&view["repository"]),
            indices,
            include_global_state: flag_of(&view["include_global_state"]),
            enabled: flag_of(&view["enabled"]),
            schedule: Value::Value(Schedule {
                interval: str_of(&schedule["interval"]),
                cron: str_of(&schedule["cron"]),
                timezone,
            }),
            retention,
            schedule_expression: str_of(&view["schedule_expression"]["expression"]),
            attached_deployments: num_of(&view["attached_deployments"]),
            resource_version: num_of(&view["resource_version"]),
        }
    }

    fn declared(&self) -> PolicyState {
        PolicyState {
            attached_deployments: Value::Null,
            resource_version: Value::Null,
            schedule_expression: Value::Null,
            ..self.clone()
        }
    }
}

#[async_trait]
impl Resource for PolicyResource {
    type State<'a> = PolicyState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: block(
                "A snapshot policy: a schedule (one EventBridge schedule per deployment it is attached to), the snapshot's name, the repository, and SLM retention. See docs/terraform/snapshot_policy.md.",
                vec![
                    (
                        "id",
                        computed(string(), "The policy's id, which deployments attach by."),
                    ),
                    ("name", required(string(), "DNS-safe name.")),
                    (
                        "snapshot_name",
                        required(
                            string(),
                            "A snapshot name, or Elasticsearch date math such as `<nightly-{now/d}>`.",
                        ),
                    ),
                    (
                        "repository",
                        required(string(), "The repository the snapshots go to."),
                    ),
                    (
                        "indices",
                        optional(strings(), "Index patterns; every index when absent."),
                    ),
                    (
                        "include_global_state",
                        defaulted(bool(), "Whether snapshots include the cluster state."),
                    ),
                    (
                        "enabled",
                        defaulted(bool(), "Whether the schedule runs (default true)."),
                    ),
                    (
                        "schedule_expression",
                        computed(
                            string(),
                            "The schedule in EventBridge Scheduler's terms, such as `rate(30 minutes)`.",
                        ),
                    ),
                    (
                        "attached_deployments",
                        computed(number(), "Deployments the policy is attached to."),
                    ),
                    (
                        "resource_version",
                        computed(
                            number(),
                            "The policy's version; updates and the delete send it (`If-Match`).",
                        ),
                    ),
                ],
                vec![
                    (
                        "schedule",
                        NestedBlock::Single(block(
                            "Exactly one of `interval` and `cron`.",
                            vec![
                                (
                                    "interval",
                                    optional(
                                        string(),
                                        "Elasticsearch time value, whole minutes, at least `1m`, such as `30m`.",
                                    ),
                                ),
                                (
                                    "cron",
                                    optional(
                                        string(),
                                        "SLM cron: `sec min hour day-of-month month day-of-week [year]`, such as `0 30 1 * * ?`.",
                                    ),
                                ),
                                (
                                    "timezone",
                                    optional(
                                        string(),
                                        "IANA time zone of `cron`; UTC when absent.",
                                    ),
                                ),
                            ],
                            vec![],
                        )),
                    ),
                    (
                        "retention",
                        NestedBlock::Optional(block(
                            "SLM retention: which snapshots the policy deletes.",
                            vec![
                                (
                                    "expire_after",
                                    optional(
                                        string(),
                                        "Delete snapshots older than this, such as `30d`.",
                                    ),
                                ),
                                (
                                    "min_count",
                                    optional(number(), "Always keep at least this many."),
                                ),
                                ("max_count", optional(number(), "Keep at most this many.")),
                            ],
                            vec![],
                        )),
                    ),
                ],
            ),
        })
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        state: Self::State<'a>,
        private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let configured = self.0.get(diags)?;
        let id = state.id.as_ref_option()?.clone();
        match configured.client.get_optional(&path(&id)).await {
            Ok(Some(view)) => Some((PolicyState::from_view(&view, &state), private_state)),
            Ok(None) => None,
            Err(e) => {
                report(diags, "reading the snapshot policy", &e, locate);
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
        state.id = Value::Unknown;
        state.schedule_expression = Value::Unknown;
        state.attached_deployments = Value::Unknown;
        state.resource_version = Value::Unknown;
        if state.include_global_state.is_null() {
            state.include_global_state = Value::Unknown;
        }
        if state.enabled.is_null() {
            state.enabled = Value::Unknown;
        }
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
        if state.declared() != prior.declared() {
            state.resource_version = Value::Unknown;
            if state.schedule != prior.schedule {
                state.schedule_expression = Value::Unknown;
            }
        }
        Some((state, prior_private, vec![]))
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
        match configured
            .client
            .call(
                Method::POST,
                "/api/v1/snapshot-policies",
                Some(&planned.body()),
                None,
            )
            .await
        {
            Ok(a) => Some((PolicyState::from_view(&a.body, &planned), private)),
            Err(e) => {
                report(diags, "creating the snapshot policy", &e, locate);
                None
            }
        }
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
        let configured = self.0.get(diags)?;
        let id = prior.id.as_ref_option()?.clone();
        let version = prior.resource_version.as_ref_option().copied();
        match configured
            .client
            .call(Method::PUT, &path(&id), Some(&planned.body()), version)
            .await
        {
            Ok(a) => Some((PolicyState::from_view(&a.body, &planned), private)),
            Err(e) => {
                report(diags, "updating the snapshot policy", &e, locate);
                None
            }
        }
    }

    async fn destroy<'a>(
        &self,
        diags: &mut Diagnostics,
        prior: Self::State<'a>,
        _private: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<()> {
        let configured = self.0.get(diags)?;
        let id = prior.id.as_ref_option()?.clone();
        let version = prior.resource_version.as_ref_option().copied();
        let doing = "deleting the snapshot policy";
        delete_at(configured, diags, &path(&id), version, doing, locate).await
    }

    async fn import<'a>(
        &self,
        _diags: &mut Diagnostics,
        id: String,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        Some((
            PolicyState {
                id: Value::Value(id),
                ..Default::default()
            },
            Default::default(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_fields_point_into_its_block() {
        assert_eq!(
            locate("retention.max_count"),
            Some(
                AttributePath::new("retention")
                    .index(0)
                    .attribute("max_count")
            )
        );
        assert_eq!(
            locate("schedule.interval"),
            Some(AttributePath::new("schedule").attribute("interval"))
        );
    }
}
