//! Plans, and the active-plan index the sweep reads: a plan is created
//! with its deployment's change, updated as it progresses, and finished
//! together with its outcome on the deployment.

use super::batch::{Batch, Meaning};
use super::deployments::{deployment_refs, push_deployment_delete, push_deployment_update};
use super::{Page, PageRequest, SYSTEM_ORG, Store, StoreError, Versioned, encode, record};
use crate::backend::{Attrs, Filter, Kind, RecordKey, Write};
use floe_domain::deployment::Deployment;
use floe_domain::plan::Plan;
use serde::{Deserialize, Serialize};

/// An entry of the active-plan index: where to find an unfinished plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivePlan {
    pub org: String,
    pub deployment_id: String,
    pub plan_id: String,
}

/// What finishing a plan does to its deployment, in the same batch.
pub enum DeploymentOutcome<'a> {
    /// Store the deployment's new state (status, pending plan cleared).
    Update {
        deployment: &'a Deployment,
        previous: &'a Versioned<Deployment>,
    },
    /// Remove the deployment record and release its references.
    Delete(&'a Versioned<Deployment>),
    /// As `Delete`, keeping the deployment's snapshots: `former` lists
    /// them under their repository and holds a reference on it.
    DeleteKeepingSnapshots {
        previous: &'a Versioned<Deployment>,
        former: &'a floe_domain::snapshot::FormerDeployment,
    },
}

fn plan_key(p: &Plan) -> RecordKey {
    RecordKey::new(&p.org, Kind::Plan, &format!("{}#{}", p.deployment_id, p.id))
}

/// The plan's next version, if it is still at `expected`.
fn plan_update(plan: &Plan, expected: u64) -> Result<Write, StoreError> {
    Ok(Write::Update {
        record: record(
            plan_key(plan),
            encode(plan)?,
            expected + 1,
            plan_attrs(plan),
        ),
        expected,
    })
}

fn active_key(p: &Plan) -> RecordKey {
    RecordKey::new(
        SYSTEM_ORG,
        Kind::ActivePlan,
        &format!("{}#{}#{}", p.org, p.deployment_id, p.id),
    )
}

/// A new plan and its active-plan index entry.
pub(super) fn push_new_plan(b: &mut Batch, plan: &Plan) -> Result<(), StoreError> {
    b.push(
        Write::Create(record(plan_key(plan), encode(plan)?, 1, plan_attrs(plan))),
        Meaning::Own,
    );
    let entry = ActivePlan {
        org: plan.org.clone(),
        deployment_id: plan.deployment_id.clone(),
        plan_id: plan.id.clone(),
    };
    b.push(
        Write::Create(record(
            active_key(plan),
            encode(&entry)?,
            1,
            Attrs::default(),
        )),
        Meaning::Own,
    );
    Ok(())
}

impl Store {
    pub async fn get_plan(
        &self,
        org: &str,
        deployment_id: &str,
        plan_id: &str,
    ) -> Result<Option<Versioned<Plan>>, StoreError> {
        self.get(RecordKey::new(
            org,
            Kind::Plan,
            &format!("{deployment_id}#{plan_id}"),
        ))
        .await
    }

    /// Writes the plan's progress, if it is still at `expected`.
    pub async fn update_plan(&self, plan: &Plan, expected: u64) -> Result<u64, StoreError> {
        let mut b = Batch::default();
        b.push(plan_update(plan, expected)?, Meaning::Own);
        b.run(self.backend.as_ref()).await?;
        Ok(expected + 1)
    }

    /// Records a finished plan, drops it from the active index and applies
    /// its outcome to the deployment, all or nothing.
    pub async fn finish_plan(
        &self,
        plan: &Plan,
        expected: u64,
        outcome: DeploymentOutcome<'_>,
    ) -> Result<u64, StoreError> {
        let mut b = Batch::default();
        b.push(plan_update(plan, expected)?, Meaning::Own);
        b.push(
            Write::Delete {
                key: active_key(plan),
                expected: 1,
                unreferenced: false,
            },
            Meaning::Own,
        );
        match outcome {
            DeploymentOutcome::Update {
                deployment,
                previous,
            } => {
                push_deployment_update(&mut b, deployment, previous.version)?;
                b.reference_changes(
                    &deployment.org,
                    &deployment_refs(&previous.value),
                    &deployment_refs(deployment),
                );
                b.pin_changes(Some(&previous.value), Some(deployment))?;
            }
            DeploymentOutcome::Delete(previous) => {
                let d = &previous.value;
                push_deployment_delete(&mut b, d, previous.version);
                b.reference_changes(&d.org, &deployment_refs(d), &[]);
                b.pin_changes(Some(d), None)?;
            }
            DeploymentOutcome::DeleteKeepingSnapshots { previous, former } => {
                let d = &previous.value;
                push_deployment_delete(&mut b, d, previous.version);
                super::former::push_former_create(&mut b, former)?;
                // One net change per repository: DynamoDB allows one
                // write per item in a transaction.
                b.reference_changes(
                    &d.org,
                    &deployment_refs(d),
                    &[(Kind::Repository, former.repository.clone())],
                );
                b.pin_changes(Some(d), None)?;
            }
        }
        b.run(self.backend.as_ref()).await?;
        Ok(expected + 1)
    }

    /// One page of the active-plan index (all organizations), for the sweep.
    pub async fn list_active_plans(
        &self,
        page: &PageRequest,
    ) -> Result<Page<ActivePlan>, StoreError> {
        let page = self
            .list::<ActivePlan>(
                SYSTEM_ORG,
                Kind::ActivePlan,
                String::new(),
                Filter::default(),
                page,
            )
            .await?;
        Ok(Page {
            items: page.items.into_iter().map(|v| v.value).collect(),
            next_cursor: page.next_cursor,
        })
    }

    /// Removes the plan records of a deleted deployment, a page at a
    /// time; returns how many went. Records written since the page was
    /// read are left (the next call removes them).
    pub async fn delete_plans_of(
        &self,
        org: &str,
        deployment_id: &str,
    ) -> Result<usize, StoreError> {
        self.delete_all_of(org, Kind::Plan, deployment_id).await
    }

    /// Removes the policy run states of a deleted deployment, as
    /// [`Store::delete_plans_of`] its plans.
    pub async fn delete_policy_runs_of(
        &self,
        org: &str,
        deployment_id: &str,
    ) -> Result<usize, StoreError> {
        self.delete_all_of(org, Kind::PolicyRun, deployment_id)
            .await
    }

    /// Removes every record of `kind` keyed `{deployment_id}#…`, a page
    /// (one batch) at a time.
    async fn delete_all_of(
        &self,
        org: &str,
        kind: Kind,
        deployment_id: &str,
    ) -> Result<usize, StoreError> {
        let mut removed = 0;
        let page = PageRequest {
            size: Some(super::MAX_PAGE_SIZE),
            cursor: None,
        };
        loop {
            let listed = self
                .list_records(
                    org,
                    kind,
                    format!("{deployment_id}#"),
                    Filter::default(),
                    &page,
                )
                .await?;
            if listed.items.is_empty() {
                return Ok(removed);
            }
            let mut b = Batch::default();
            for r in &listed.items {
                b.push(
                    Write::Delete {
                        key: r.key.clone(),
                        expected: r.version,
                        unreferenced: false,
                    },
                    Meaning::Own,
                );
            }
            let n = listed.items.len();
            b.run(self.backend.as_ref()).await?;
            removed += n;
            if listed.next_cursor.is_none() {
                return Ok(removed);
            }
        }
    }

    pub async fn list_plans(
        &self,
        org: &str,
        deployment_id: &str,
        page: &PageRequest,
    ) -> Result<Page<Versioned<Plan>>, StoreError> {
        self.list(
            org,
            Kind::Plan,
            format!("{deployment_id}#"),
            Filter::default(),
            page,
        )
        .await
    }
}

fn plan_attrs(p: &Plan) -> Attrs {
    Attrs {
        name: None,
        status: serde_json::to_value(p.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string)),
        tags: Vec::new(),
    }
}
