//! The use cases over a SQLite store, the local queue and a recording
//! ScheduleSync: what each stores, which plan it starts, whom it wakes and
//! which schedules it asks to follow.

use crate::deployments::Creation;
use crate::{App, AppError, Caller, Resource};
use async_trait::async_trait;
use floe_auth::Role;
use floe_domain::Code;
use floe_domain::deployment::{DeploymentSpec, DeploymentStatus};
use floe_domain::plan::{FORCE_ENDED, PlanKind, PlanStatus};
use floe_domain::policy::PolicySpec;
use floe_domain::repository::EndpointPolicy;
use floe_ports::{LocalQueue, PlanJob, QueueError, ReconcileJob, ScheduleSync};
use floe_store::backend::{Backend, BackendError, ListQuery, Record, RecordKey, RecordPage, Write};
use floe_store::{DeploymentOutcome, Store};
use floe_store_sqlite::SqliteBackend;
use serde_json::json;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedReceiver;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[derive(Default)]
struct Recorded(Mutex<Vec<ReconcileJob>>);

#[async_trait]
impl ScheduleSync for Recorded {
    async fn sync(&self, job: ReconcileJob) -> Result<(), QueueError> {
        if let Ok(mut jobs) = self.0.lock() {
            jobs.push(job);
        }
        Ok(())
    }
}

impl Recorded {
    fn take(&self) -> Vec<ReconcileJob> {
        self.0
            .lock()
            .map(|mut j| std::mem::take(&mut *j))
            .unwrap_or_default()
    }
}

/// The store port's calls, in order, over SQLite. Each is one DynamoDB
/// request on AWS (a get one GetItem, a list one Query, a write one
/// TransactWriteItems), so the count pins what an operation costs there.
struct Counted {
    inner: SqliteBackend,
    calls: Mutex<Vec<&'static str>>,
}

impl Counted {
    fn take(&self) -> Vec<&'static str> {
        self.calls
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default()
    }

    fn note(&self, call: &'static str) {
        if let Ok(mut c) = self.calls.lock() {
            c.push(call);
        }
    }
}

#[async_trait]
impl Backend for Counted {
    async fn get(&self, key: &RecordKey) -> Result<Option<Record>, BackendError> {
        self.note("get");
        self.inner.get(key).await
    }
    async fn list(&self, query: &ListQuery) -> Result<RecordPage, BackendError> {
        self.note("list");
        self.inner.list(query).await
    }
    async fn write(&self, writes: Vec<Write>) -> Result<(), BackendError> {
        self.note("write");
        self.inner.write(writes).await
    }
    fn quiet_mark(&self) -> Option<u64> {
        self.inner.quiet_mark()
    }
}

struct World {
    app: App,
    jobs: UnboundedReceiver<PlanJob>,
    synced: Arc<Recorded>,
    backend: Arc<Counted>,
}

fn world() -> Result<World, Box<dyn std::error::Error>> {
    world_on(SqliteBackend::in_memory()?)
}

fn world_on(inner: SqliteBackend) -> Result<World, Box<dyn std::error::Error>> {
    let (queue, jobs) = LocalQueue::new();
    let synced = Arc::new(Recorded::default());
    let compute = Arc::new(floe_compute_sim::SimulatedCompute::new(
        floe_compute_sim::SimulatedConfig::default(),
    ));
    let backend = Arc::new(Counted {
        inner,
        calls: Mutex::new(Vec::new()),
    });
    let app = App {
        store: Store::new(backend.clone()),
        cipher: Arc::new(floe_secrets::LocalCipher::from_key(&[3u8; 32])),
        endpoint_policy: EndpointPolicy::default(),
        endpoints: floe_domain::access::EndpointNaming::Loopback,
        queue: Arc::new(queue),
        schedules: synced.clone(),
        clusters: Arc::new(floe_clusters_sim::SimulatedClusters::new(
            compute,
            floe_clusters_sim::SimulatedClustersConfig::default(),
        )),
        resolver: Arc::new(
            floe_ports::FixedResolver::default()
                .with(
                    "s3.example.com",
                    &[std::net::IpAddr::from([203, 0, 113, 10])],
                )
                .with(
                    "s3.elsewhere.example",
                    &[std::net::IpAddr::from([203, 0, 113, 11])],
                ),
        ),
        views: Default::default(),
        hashing_keys: Default::default(),
    };
    Ok(World {
        app,
        jobs,
        synced,
        backend,
    })
}

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

fn spec(count: u32) -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(json!({
        "name": "logs", "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.large",
                         "count": count, "zone_count": 1, "storage": {"size_gb": 20}}]
    }))
}

fn created(c: Creation) -> Result<floe_domain::deployment::DeploymentView, String> {
    match c {
        Creation::Created(v) => Ok(v),
        Creation::Replayed(v) => Err(format!("replayed {}", v.id)),
    }
}

#[tokio::test]
async fn a_create_stores_an_initializing_deployment_and_wakes_a_worker() -> TestResult {
    let mut w = world()?;
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let view = created(w.app.create_deployment(&who, spec(1)?, Some("k1")).await?)?;
    assert_eq!(view.status, DeploymentStatus::Initializing);
    let job = w.jobs.try_recv()?;
    assert_eq!(job.deployment_id, view.id);
    let plan = w
        .app
        .store
        .get_plan("acme", &view.id, &job.plan_id)
        .await?
        .ok_or("plan stored")?;
    assert_eq!(plan.value.kind(), PlanKind::Create);

    // The same key and body answer the first result; another body is refused.
    match w.app.create_deployment(&who, spec(1)?, Some("k1")).await? {
        Creation::Replayed(first) => assert_eq!(first.id, view.id),
        Creation::Created(_) => return Err("a retry created another deployment".into()),
    }
    let other = w.app.create_deployment(&who, spec(2)?, Some("k1")).await;
    assert!(
        matches!(
            other,
            Err(AppError::Conflict {
                code: Code::REQUEST_IDEMPOTENCY_KEY_REUSED,
                ..
            })
        ),
        "{other:?}"
    );
    let bad_key = w.app.create_deployment(&who, spec(1)?, Some("")).await;
    assert!(matches!(bad_key, Err(AppError::Invalid(_))), "{bad_key:?}");
    Ok(())
}

#[tokio::test]
async fn each_deployment_operation_makes_the_fewest_store_calls_it_needs() -> TestResult {
    let w = world()?;
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let reader = caller(&[Role::DeploymentViewer]).reader()?;
    // A create with a new key is one transaction: the key is checked by
    // the write, not by a read before it.
    let view = created(w.app.create_deployment(&who, spec(1)?, Some("k1")).await?)?;
    assert_eq!(w.backend.take(), ["write"]);
    let _ = created(w.app.create_deployment(&who, spec(1)?, None).await?)?;
    assert_eq!(w.backend.take(), ["write"]);
    // A replay pays the refused write, then reads the key and its deployment.
    let replayed = w.app.create_deployment(&who, spec(1)?, Some("k1")).await?;
    assert!(matches!(replayed, Creation::Replayed(_)), "{replayed:?}");
    assert_eq!(w.backend.take(), ["write", "get", "get"]);
    w.app.get_deployment(&reader, &view.id).await?;
    assert_eq!(w.backend.take(), ["get"]);
    let query = crate::deployments::DeploymentQuery {
        status: Some("initializing".into()),
        tag: Some("team:search".into()),
        name_prefix: Some("lo".into()),
        ..Default::default()
    };
    w.app.list_deployments(&reader, query).await?;
    assert_eq!(w.backend.take(), ["list"]);
    // The pending plan is on the page of plans: it is not read again.
    let plans = w
        .app
        .deployment_plans(&reader, &view.id, Default::default())
        .await?;
    assert!(plans.pending.is_some());
    assert_eq!(w.backend.take(), ["get", "list"]);
    Ok(())
}

#[tokio::test]
async fn a_dangling_repository_is_named_on_its_field() -> TestResult {
    let w = world()?;
    let who = caller(&[Role::PlatformAdmin]).manager()?;
    let mut s = spec(1)?;
    s.snapshot = Some(serde_json::from_value(json!({"repository": "nowhere"}))?);
    let Err(AppError::Invalid(invalid)) = w.app.create_deployment(&who, s, None).await else {
        return Err("expected a validation error".into());
    };
    assert_eq!(invalid.0[0].field, "snapshot.repository");
    assert_eq!(invalid.0[0].code, "validation.repository_not_found");
    Ok(())
}

/// Issue 33: `tag=a:b:c` matched both `{a:b = c}` and `{a = b:c}`. A key
/// with `:` is refused on write; the filter splits at the first `:`, and a
/// record written before the refusal is not listed for the other reading.
#[tokio::test]
async fn a_tag_filter_names_one_tag() -> TestResult {
    let w = world()?;
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let reader = caller(&[Role::DeploymentViewer]).reader()?;
    let tagged = |key: &str, value: &str| -> Result<DeploymentSpec, serde_json::Error> {
        let mut s = spec(1)?;
        s.metadata.tags = vec![floe_domain::deployment::Tag {
            key: key.into(),
            value: value.into(),
        }];
        Ok(s)
    };
    let refused = w
        .app
        .create_deployment(&who, tagged("a:b", "c")?, None)
        .await;
    let Err(AppError::Invalid(invalid)) = refused else {
        return Err(format!("a key with ':' was accepted: {refused:?}").into());
    };
    assert_eq!(invalid.0[0].field, "metadata.tags[0].key");
    assert_eq!(invalid.0[0].code, "validation.tag");

    let wanted = created(
        w.app
            .create_deployment(&who, tagged("a", "b:c")?, None)
            .await?,
    )?;
    // One stored before keys were refused a ':'.
    let old = created(
        w.app
            .create_deployment(&who, tagged("a", "x")?, None)
            .await?,
    )?;
    let current = w
        .app
        .store
        .get_deployment("acme", &old.id)
        .await?
        .ok_or("stored")?;
    let mut legacy = current.value.clone();
    legacy.spec.metadata.tags = tagged("a:b", "c")?.metadata.tags;
    w.app
        .store
        .replace_deployment(&legacy, &current, None)
        .await?;

    let list = |tag: &str| {
        let query = crate::deployments::DeploymentQuery {
            tag: Some(tag.into()),
            ..Default::default()
        };
        let (app, reader) = (&w.app, &reader);
        async move {
            let listed = app.list_deployments(reader, query).await?;
            let ids: Vec<String> = listed
                .deployments
                .iter()
                .map(|d| {
                    serde_json::from_str::<serde_json::Value>(d.json())
                        .map(|v| v["id"].as_str().unwrap_or_default().to_string())
                })
                .collect::<Result<_, _>>()?;
            Ok::<_, Box<dyn std::error::Error>>(ids)
        }
    };
    assert_eq!(list("a:b:c").await?, vec![wanted.id]);
    assert_eq!(list("a:x").await?, Vec::<String>::new());
    Ok(())
}

/// Moves a stored deployment to `status` with no pending plan, as a plan end would.
async fn settle(app: &App, id: &str, status: DeploymentStatus) -> TestResult {
    let current = app
        .store
        .get_deployment("acme", id)
        .await?
        .ok_or("stored")?;
    let mut next = current.value.clone();
    next.status = status;
    next.pending_plan = None;
    app.store.replace_deployment(&next, &current, None).await?;
    Ok(())
}

/// Succeeds the pending delete plan as the engine does: the record goes.
async fn finish_delete(app: &App, id: &str) -> TestResult {
    let current = app
        .store
        .get_deployment("acme", id)
        .await?
        .ok_or("stored")?;
    let pending = current.value.pending_plan.clone().ok_or("a pending plan")?;
    assert_eq!(pending.kind, PlanKind::Delete);
    let pv = app
        .store
        .get_plan("acme", id, &pending.plan_id)
        .await?
        .ok_or("the plan")?;
    let mut plan = pv.value;
    plan.status = PlanStatus::Succeeded;
    app.store
        .finish_plan(&plan, pv.version, DeploymentOutcome::Delete(&current))
        .await?;
    Ok(())
}

#[tokio::test]
async fn plans_take_the_status_of_their_kind_and_schedules_follow() -> TestResult {
    let mut w = world()?;
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let id = created(w.app.create_deployment(&who, spec(1)?, None).await?)?.id;
    w.jobs.try_recv()?;
    assert!(w.synced.take().is_empty(), "a create has no schedules yet");

    // A resize needs a plan, refused while the create is pending.
    let pending = w.app.update_deployment(&who, &id, None, spec(2)?).await;
    assert!(
        matches!(
            pending,
            Err(AppError::Conflict {
                code: Code::DEPLOYMENTS_PLAN_IN_PROGRESS,
                ..
            })
        ),
        "{pending:?}"
    );
    settle(&w.app, &id, DeploymentStatus::Running).await?;
    let stale = w.app.update_deployment(&who, &id, Some(1), spec(2)?).await;
    assert!(
        matches!(stale, Err(AppError::PreconditionFailed { current: 2 })),
        "{stale:?}"
    );
    let resized = w
        .app
        .update_deployment(&who, &id, Some(2), spec(2)?)
        .await?;
    assert_eq!(resized.status, DeploymentStatus::Reconfiguring);
    assert_eq!(w.jobs.try_recv()?.deployment_id, id);
    assert_eq!(w.synced.take(), vec![ReconcileJob::deployment("acme", &id)]);

    settle(&w.app, &id, DeploymentStatus::Running).await?;
    let stopping = w.app.shutdown_deployment(&who, &id, true).await?;
    assert_eq!(stopping.status, DeploymentStatus::Stopping);
    assert_eq!(w.synced.take(), vec![ReconcileJob::deployment("acme", &id)]);
    let deleting = w.app.delete_deployment(&who, &id, None).await;
    assert!(
        matches!(
            deleting,
            Err(AppError::Conflict {
                code: Code::DEPLOYMENTS_DEPLOYMENT_NOT_STOPPED,
                ..
            })
        ),
        "{deleting:?}"
    );

    // Cancelling: the pending shutdown is asked to stop; without one, nothing is pending.
    let cancelled = w.app.cancel_pending_plan(&who, &id).await?;
    assert!(cancelled.cancel_requested);
    settle(&w.app, &id, DeploymentStatus::Stopped).await?;
    let none = w.app.cancel_pending_plan(&who, &id).await;
    assert_eq!(
        none.err(),
        Some(AppError::not_found(Resource::PendingPlan, &id))
    );

    // A delete is a plan too: the record goes when it succeeds, and a
    // second DELETE meanwhile answers the same plan.
    while w.jobs.try_recv().is_ok() {}
    let deleting = w.app.delete_deployment(&who, &id, None).await?;
    assert_eq!(deleting.status, DeploymentStatus::Stopping);
    assert_eq!(w.jobs.try_recv()?.deployment_id, id);
    let again = w.app.delete_deployment(&who, &id, None).await?;
    assert_eq!(again.resource_version, deleting.resource_version);
    assert!(w.jobs.try_recv().is_err(), "one delete plan, woken once");
    finish_delete(&w.app, &id).await?;
    let gone = w
        .app
        .get_deployment(&caller(&[Role::DeploymentViewer]).reader()?, &id)
        .await;
    assert_eq!(
        gone.err(),
        Some(AppError::not_found(Resource::Deployment, &id))
    );
    Ok(())
}

/// The way out of a stuck plan (issue 12, defect 4): a forced end records
/// the plan failed and the deployment failed in one write, clears the
/// pending plan and the sweep's index, and a change is accepted again.
#[tokio::test]
async fn a_pending_plan_can_be_ended_by_force() -> TestResult {
    let mut w = world()?;
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let id = created(w.app.create_deployment(&who, spec(1)?, None).await?)?.id;
    w.jobs.try_recv()?;
    w.synced.take();
    let plan_id = w
        .app
        .get_deployment(&caller(&[Role::DeploymentViewer]).reader()?, &id)
        .await?
        .plans
        .pending
        .ok_or("a pending create")?
        .plan_id;

    // Asked politely first: nothing ends yet, the engine unwinds it.
    let asked = w.app.cancel_pending_plan(&who, &id).await?;
    assert!(asked.cancel_requested);
    assert_eq!(asked.status, PlanStatus::Pending);

    let ended = w.app.force_end_pending_plan(&who, &id).await?;
    assert_eq!(ended.plan_attempt_id, plan_id);
    assert_eq!(ended.status, PlanStatus::Failed);
    let error = ended.error.as_ref().ok_or("an error")?;
    assert_eq!(error.failure_type, FORCE_ENDED);
    assert!(error.message.contains(&who.subject), "{}", error.message);

    let view = w
        .app
        .get_deployment(&caller(&[Role::DeploymentViewer]).reader()?, &id)
        .await?;
    assert_eq!(view.status, DeploymentStatus::Failed);
    assert!(view.plans.pending.is_none());
    let stored = w
        .app
        .store
        .get_plan("acme", &id, &plan_id)
        .await?
        .ok_or("kept in the history")?;
    assert_eq!(stored.value.status, PlanStatus::Failed);
    let active = w
        .app
        .store
        .list_active_plans(&floe_store::PageRequest::default())
        .await?;
    assert!(active.items.is_empty(), "the sweep no longer wakes it");
    assert_eq!(w.synced.take(), vec![ReconcileJob::deployment("acme", &id)]);

    // Nothing is pending any more, forced or not.
    for forced in [false, true] {
        let none = if forced {
            w.app.force_end_pending_plan(&who, &id).await
        } else {
            w.app.cancel_pending_plan(&who, &id).await
        };
        assert_eq!(
            none.err(),
            Some(AppError::not_found(Resource::PendingPlan, &id))
        );
    }
    // The operator converges by sending the spec again: a new plan.
    let again = w.app.update_deployment(&who, &id, None, spec(1)?).await?;
    assert_eq!(again.status, DeploymentStatus::Initializing);
    assert_eq!(w.jobs.try_recv()?.deployment_id, id);
    Ok(())
}

#[tokio::test]
async fn a_policy_change_reconciles_the_policys_schedules() -> TestResult {
    let w = world()?;
    let admin = caller(&[Role::PlatformAdmin]).admin()?;
    let repo = serde_json::from_value(json!({"type": "fs", "settings": {"location": "backups"}}))?;
    let put = w.app.put_repository(&admin, "main", None, repo).await?;
    assert!(
        matches!(put, crate::repositories::Put::Created(_)),
        "{put:?}"
    );
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let spec: PolicySpec = serde_json::from_value(json!({
        "name": "every-30-minutes", "schedule": {"interval": "30m"},
        "snapshot_name": "<floe-{now/d}>", "repository": "main"
    }))?;
    let policy = w.app.create_policy(&who, spec.clone()).await?;
    assert!(w.synced.take().is_empty(), "nothing attaches a new policy");
    let updated = w.app.update_policy(&who, &policy.id, Some(1), spec).await?;
    assert_eq!(updated.resource_version, 2);
    assert_eq!(
        w.synced.take(),
        vec![ReconcileJob::policy("acme", &policy.id)]
    );
    let in_use = w.app.delete_repository(&admin, "main", None).await;
    assert!(
        matches!(
            in_use,
            Err(AppError::Conflict {
                code: Code::REPOSITORIES_REPOSITORY_IN_USE,
                ..
            })
        ),
        "{in_use:?}"
    );
    w.app.delete_policy(&who, &policy.id, Some(2)).await?;
    w.app.delete_repository(&admin, "main", None).await?;
    let gone = w
        .app
        .get_policy(&caller(&[Role::DeploymentViewer]).reader()?, &policy.id)
        .await;
    assert_eq!(
        gone.err(),
        Some(AppError::not_found(Resource::Policy, &policy.id))
    );
    Ok(())
}

/// A failed deployment is fixed by sending its spec again: a start when it
/// never ran, an update when it did (ECE's "apply the plan again").
#[tokio::test]
async fn a_failed_deployment_is_fixed_by_applying_its_spec_again() -> TestResult {
    let mut w = world()?;
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let view = created(w.app.create_deployment(&who, spec(1)?, None).await?)?;
    let _ = w.jobs.try_recv()?;
    let fail = |w: &World, access: bool| {
        let app = w.app.clone();
        let id = view.id.clone();
        async move {
            let previous = app
                .store
                .get_deployment("acme", &id)
                .await?
                .ok_or("stored")?;
            let mut next = previous.value.clone();
            next.status = DeploymentStatus::Failed;
            next.pending_plan = None;
            next.access = access.then(|| floe_domain::access::ClusterAccess {
                ca_cert_pem: "ca".into(),
                sealed_password: "sealed".into(),
                nodes: Vec::new(),
                http_port: 9200,
            });
            app.store.replace_deployment(&next, &previous, None).await?;
            Ok::<_, Box<dyn std::error::Error>>(())
        }
    };
    for (ran, kind) in [(false, PlanKind::Start), (true, PlanKind::Update)] {
        fail(&w, ran).await?;
        let fixing = w
            .app
            .update_deployment(&who, &view.id, None, spec(1)?)
            .await?;
        assert_eq!(fixing.status, kind_status(kind));
        let job = w.jobs.try_recv()?;
        let plan = w
            .app
            .store
            .get_plan("acme", &view.id, &job.plan_id)
            .await?
            .ok_or("plan")?;
        assert_eq!(plan.value.kind(), kind, "ran before: {ran}");
    }
    Ok(())
}

fn kind_status(kind: PlanKind) -> DeploymentStatus {
    floe_domain::plan::lifecycle::while_running(kind)
}

/// The create's answer carries the elastic password; a retry of the same
/// create by the same caller gets it again; a read never does.
#[tokio::test]
async fn the_password_is_in_the_create_and_its_retry_only() -> TestResult {
    let w = world()?;
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let first = created(
        w.app
            .create_deployment(&who, spec(1)?, Some("once"))
            .await?,
    )?;
    let password = first.credentials.clone().ok_or("credentials")?.password;
    assert_eq!(password.len(), 32);
    let Creation::Replayed(again) = w
        .app
        .create_deployment(&who, spec(1)?, Some("once"))
        .await?
    else {
        return Err("a retry created another deployment".into());
    };
    assert_eq!(
        again.credentials.map(|c| c.password),
        Some(password.clone())
    );
    let reader = caller(&[Role::DeploymentViewer]).reader()?;
    let read = w.app.get_deployment(&reader, &first.id).await?;
    assert!(read.credentials.is_none());
    let stored = w
        .app
        .store
        .get_deployment("acme", &first.id)
        .await?
        .ok_or("stored")?;
    assert!(
        !serde_json::to_string(&stored.value)?.contains(&password),
        "the record holds the password sealed only"
    );
    Ok(())
}

/// A version change that Elastic does not support is refused before any
/// plan, naming the path that is.
#[tokio::test]
async fn versions_move_only_forward_along_supported_paths() -> TestResult {
    let w = world()?;
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let view = created(w.app.create_deployment(&who, spec(1)?, None).await?)?;
    for (to, says) in [("8.14.0", "downgraded"), ("9.0.0", "upgrade to 8.18 first")] {
        let mut next = spec(1)?;
        next.version = to.into();
        match w.app.update_deployment(&who, &view.id, None, next).await {
            Err(AppError::Invalid(invalid)) => {
                let problem = invalid.0.first().ok_or("a problem")?;
                assert_eq!(problem.field, "version");
                assert_eq!(problem.code, "deployments.version_change");
                assert!(problem.message.contains(says), "{}", problem.message);
            }
            other => return Err(format!("{to}: {other:?}").into()),
        }
    }
    Ok(())
}

/// A stored secret key is sent only where it went before: a PUT that moves
/// the endpoint, changes the protocol or the access key without sending
/// the secret leaves the repository without one.
#[tokio::test]
async fn stored_secrets_never_follow_a_new_endpoint() -> TestResult {
    let w = world()?;
    let admin = caller(&[Role::PlatformAdmin]).admin()?;
    let body = |endpoint: &str, protocol: &str, secret: bool| {
        let mut settings = json!({"bucket": "snaps", "endpoint": endpoint, "protocol": protocol,
                                  "access_key": "AKIDEXAMPLE"});
        if secret {
            settings["secret_key"] = json!("a-secret-for-this-host-only");
        }
        serde_json::from_value::<floe_domain::repository::RepositoryRequest>(
            json!({"type": "s3", "settings": settings}),
        )
    };
    let secret_set = |put: crate::repositories::Put| {
        let view = match put {
            crate::repositories::Put::Created(v) | crate::repositories::Put::Replaced(v) => v,
        };
        serde_json::to_value(view).map(|v| v["settings"]["secret_key_set"] == json!(true))
    };
    for (endpoint, protocol) in [
        ("s3.elsewhere.example", "https"),
        ("s3.example.com", "http"),
    ] {
        let put = |e: &str, p: &str, secret: bool| {
            let app = w.app.clone();
            let admin = admin.clone();
            let request = body(e, p, secret);
            async move {
                app.put_repository(&admin, "fb", None, request?)
                    .await
                    .map_err(Box::<dyn std::error::Error>::from)
            }
        };
        put("s3.example.com", "https", true).await?;
        // The same place: the stored secret is kept.
        assert!(secret_set(put("s3.example.com", "https", false).await?)?);
        // Another endpoint or protocol: it is not sent there.
        assert!(
            !secret_set(put(endpoint, protocol, false).await?)?,
            "{endpoint} {protocol}"
        );
    }
    Ok(())
}

/// An update plan's target is checked for its references before it runs:
/// a policy that does not exist is a 400 on its field, not a plan whose end
/// can never be written.
#[tokio::test]
async fn an_update_plans_references_are_checked_before_it_runs() -> TestResult {
    let mut w = world()?;
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let view = created(w.app.create_deployment(&who, spec(1)?, None).await?)?;
    let _ = w.jobs.try_recv()?;
    let previous = w
        .app
        .store
        .get_deployment("acme", &view.id)
        .await?
        .ok_or("stored")?;
    let mut running = previous.value.clone();
    running.status = DeploymentStatus::Running;
    running.pending_plan = None;
    w.app
        .store
        .replace_deployment(&running, &previous, None)
        .await?;
    let mut target = spec(2)?;
    target.snapshot = Some(floe_domain::deployment::SnapshotAttachment {
        repository: None,
        policies: vec!["0193a0c4d2b77c3e9a4b5c6d7e8f9fff".into()],
    });
    match w.app.update_deployment(&who, &view.id, None, target).await {
        Err(AppError::Invalid(invalid)) => {
            assert_eq!(invalid.0[0].field, "snapshot.policies[0]");
            assert_eq!(invalid.0[0].code, "validation.policy_not_found");
        }
        other => return Err(format!("{other:?}").into()),
    }
    assert!(w.jobs.try_recv().is_err(), "no plan was started");
    Ok(())
}

/// A key whose deployment was deleted since is spent: the create answers a
/// conflict naming it, not "deployment not found" and not a second one.
#[tokio::test]
async fn an_idempotency_key_of_a_deleted_deployment_is_spent() -> TestResult {
    let w = world()?;
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let first = created(
        w.app
            .create_deployment(&who, spec(1)?, Some("once"))
            .await?,
    )?;
    let stored = w
        .app
        .store
        .get_deployment("acme", &first.id)
        .await?
        .ok_or("stored")?;
    let mut stopped = stored.value.clone();
    stopped.status = DeploymentStatus::Stopped;
    stopped.pending_plan = None;
    w.app
        .store
        .replace_deployment(&stopped, &stored, None)
        .await?;
    w.app.delete_deployment(&who, &first.id, None).await?;
    finish_delete(&w.app, &first.id).await?;
    match w.app.create_deployment(&who, spec(1)?, Some("once")).await {
        Err(AppError::Conflict { code, message, .. }) => {
            assert_eq!(code, "request.idempotency_key_spent");
            assert!(message.contains(&first.id), "{message}");
        }
        other => return Err(format!("{other:?}").into()),
    }
    Ok(())
}

/// A repository in use keeps its place (issue 12, defect 13): a change of
/// bucket, base path or type is a 409 on that field while a deployment uses
/// it, and nothing changes; throttles and clients may still change, and
/// once nothing uses it, it may move.
#[tokio::test]
async fn a_repository_in_use_keeps_its_place() -> TestResult {
    let w = world()?;
    let admin = caller(&[Role::PlatformAdmin]).admin()?;
    let manager = caller(&[Role::DeploymentManager]).manager()?;
    let request = |settings: serde_json::Value| {
        serde_json::from_value::<floe_domain::repository::RepositoryRequest>(
            json!({"type": "s3", "settings": settings}),
        )
    };
    let place = json!({"bucket": "snaps", "base_path": "prod"});
    w.app
        .put_repository(&admin, "main", None, request(place.clone())?)
        .await?;
    let mut with_repo = spec(1)?;
    with_repo.snapshot = Some(serde_json::from_value(json!({"repository": "main"}))?);
    let id = created(w.app.create_deployment(&manager, with_repo, None).await?)?.id;
    settle(&w.app, &id, DeploymentStatus::Running).await?;

    for (settings, field) in [
        (
            json!({"bucket": "other", "base_path": "prod"}),
            "settings.bucket",
        ),
        (
            json!({"bucket": "snaps", "base_path": "staging"}),
            "settings.base_path",
        ),
        (json!({"bucket": "snaps"}), "settings.base_path"),
    ] {
        match w
            .app
            .put_repository(&admin, "main", None, request(settings)?)
            .await
        {
            Err(AppError::Conflict {
                code,
                field: Some(f),
                ..
            }) => {
                assert_eq!(
                    (code.name(), f.as_str()),
                    ("repositories.location_in_use", field)
                );
            }
            other => return Err(format!("{field}: expected a 409, got {other:?}").into()),
        }
    }
    let fs = serde_json::from_value(json!({"type": "fs", "settings": {"location": "prod"}}))?;
    match w.app.put_repository(&admin, "main", None, fs).await {
        Err(AppError::Conflict { field: Some(f), .. }) => assert_eq!(f, "type"),
        other => return Err(format!("type: expected a 409, got {other:?}").into()),
    }
    let kept = w
        .app
        .get_repository(&caller(&[Role::PlatformAdmin]).reader()?, "main")
        .await?;
    assert_eq!(kept.resource_version, 1, "a refused change changes nothing");

    // The same place with a new throttle: accepted.
    let mut same = place.clone();
    same["max_snapshot_bytes_per_sec"] = json!("200mb");
    w.app
        .put_repository(&admin, "main", None, request(same)?)
        .await?;

    // Once nothing uses it, it may move.
    w.app.shutdown_deployment(&manager, &id, true).await?;
    settle(&w.app, &id, DeploymentStatus::Stopped).await?;
    w.app.delete_deployment(&manager, &id, None).await?;
    finish_delete(&w.app, &id).await?;
    w.app
        .put_repository(&admin, "main", None, request(json!({"bucket": "other"}))?)
        .await?;
    Ok(())
}

/// An endpoint given as a name is checked by the addresses it resolves to
/// (issue 12, defect 11): a name for the metadata service, a link-local or
/// (with private endpoints disallowed) a private address, or a name that
/// resolves nowhere, is a 400 on `settings.endpoint`, and nothing is
/// stored; a public name and a literal address need no resolution.
#[tokio::test]
async fn endpoint_names_are_checked_by_what_they_resolve_to() -> TestResult {
    use std::net::IpAddr;
    let mut w = world()?;
    w.app.resolver = Arc::new(
        floe_ports::FixedResolver::default()
            .with(
                "169.254.169.254.nip.io",
                &[IpAddr::from([169, 254, 169, 254])],
            )
            .with(
                "metadata.example",
                &[IpAddr::from([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254])],
            )
            .with("inside.example", &[IpAddr::from([10, 0, 0, 5])])
            .with(
                "mixed.example",
                &[
                    IpAddr::from([203, 0, 113, 9]),
                    IpAddr::from([169, 254, 1, 1]),
                ],
            )
            .with("s3.example.com", &[IpAddr::from([203, 0, 113, 10])]),
    );
    let admin = caller(&[Role::PlatformAdmin]).admin()?;
    let request = |endpoint: &str| {
        serde_json::from_value::<floe_domain::repository::RepositoryRequest>(json!({
            "type": "s3", "settings": {"bucket": "snaps", "endpoint": endpoint, "protocol": "https"}}))
    };
    for endpoint in [
        "169.254.169.254.nip.io",
        "metadata.example:9000",
        "inside.example",
        "mixed.example",
        "nowhere.example",
    ] {
        match w
            .app
            .put_repository(&admin, "fb", None, request(endpoint)?)
            .await
        {
            Err(AppError::Invalid(invalid)) => {
                let fields: Vec<&str> = invalid.0.iter().map(|e| e.field.as_str()).collect();
                assert_eq!(fields, ["settings.endpoint"], "{endpoint}: {invalid:?}");
            }
            other => return Err(format!("{endpoint}: expected a 400, got {other:?}").into()),
        }
    }
    let stored = w
        .app
        .list_repositories(
            &caller(&[Role::PlatformAdmin]).reader()?,
            Default::default(),
        )
        .await?;
    assert!(stored.repositories.is_empty(), "nothing stored");

    w.app
        .put_repository(&admin, "fb", None, request("s3.example.com")?)
        .await?;
    w.app
        .put_repository(&admin, "lit", None, request("203.0.113.20:9000")?)
        .await?;

    // A platform that allows private stores takes a name for one.
    w.app.endpoint_policy.allow_private = true;
    w.app
        .put_repository(&admin, "onprem", None, request("inside.example")?)
        .await?;
    for still_refused in ["169.254.169.254.nip.io", "mixed.example"] {
        assert!(
            w.app
                .put_repository(&admin, "x", None, request(still_refused)?)
                .await
                .is_err(),
            "{still_refused}"
        );
    }
    Ok(())
}

/// `validate_only` only reads: no store write, no worker woken, no schedule
/// synced, whatever it answers or refuses.
#[tokio::test]
async fn validate_only_reads_and_never_writes_wakes_or_syncs() -> TestResult {
    use crate::validation::ValidationOutcome;
    use floe_domain::replacement::ReadOnlyFields;
    let mut w = world()?;
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let quiet = |w: &mut World| {
        let calls = w.backend.take();
        assert!(!calls.contains(&"write"), "{calls:?}");
        assert!(w.jobs.try_recv().is_err(), "a worker was woken");
        assert!(w.synced.take().is_empty(), "schedules were synced");
    };

    let v = w
        .app
        .validate_create_deployment(&who, spec(1)?, Some("k1"))
        .await?;
    assert_eq!(v.outcome, ValidationOutcome::Create);
    assert_eq!(v.plan.map(|p| p.kind), Some(PlanKind::Create));
    assert!(v.deployment.credentials.is_none());
    quiet(&mut w);

    let view = created(w.app.create_deployment(&who, spec(1)?, Some("k1")).await?)?;
    w.jobs.try_recv()?;
    w.backend.take();
    w.synced.take();

    // A retry, checked: a replay of the first create.
    let v = w
        .app
        .validate_create_deployment(&who, spec(1)?, Some("k1"))
        .await?;
    assert_eq!(v.outcome, ValidationOutcome::Replay);
    assert_eq!(v.deployment.id, view.id);
    quiet(&mut w);

    // A rename is recorded at once; a resize while the create plan is
    // pending is refused, as the real update refuses it.
    let mut renamed = spec(1)?;
    renamed.name = "logs-renamed".into();
    let v = w
        .app
        .validate_replace_deployment(&who, &view.id, Some(1), renamed, &ReadOnlyFields::default())
        .await?;
    assert_eq!(v.outcome, ValidationOutcome::Record);
    assert_eq!(v.deployment.name, "logs-renamed");
    quiet(&mut w);
    let resized = w
        .app
        .validate_replace_deployment(&who, &view.id, None, spec(2)?, &ReadOnlyFields::default())
        .await;
    assert!(
        matches!(
            resized,
            Err(AppError::Conflict {
                code: Code::DEPLOYMENTS_PLAN_IN_PROGRESS,
                ..
            })
        ),
        "{resized:?}"
    );
    quiet(&mut w);
    let stored = w
        .app
        .get_deployment(&caller(&[Role::DeploymentViewer]).reader()?, &view.id)
        .await?;
    assert_eq!((stored.name.as_str(), stored.resource_version), ("logs", 1));
    Ok(())
}

/// Issue 12, defect 3 (c): a mount clone reads its source's path through
/// the source's repository name and its nodes' one S3 client. A PUT may
/// not register that name at the clone's own path, nor give the clone a
/// repository the client cannot share; once a restore clone has its data,
/// the name is free to become its own (at its own path).
#[tokio::test]
async fn a_mount_clone_keeps_its_sources_registration_and_client() -> TestResult {
    use floe_domain::restore::{CloneSource, RestoreMode};
    let w = world()?;
    let admin = caller(&[Role::PlatformAdmin]).admin()?;
    for (name, endpoint) in [("fb", "s3.example.com"), ("other", "s3.elsewhere.example")] {
        let request = serde_json::from_value::<floe_domain::repository::RepositoryRequest>(
            json!({"type": "s3", "settings": {"bucket": "snaps", "endpoint": endpoint}}),
        )?;
        w.app.put_repository(&admin, name, None, request).await?;
    }
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let view = created(w.app.create_deployment(&who, spec(1)?, None).await?)?;
    settle(&w.app, &view.id, DeploymentStatus::Running).await?;
    let as_clone = |mode: RestoreMode| {
        let (app, id) = (w.app.clone(), view.id.clone());
        async move {
            let current = app
                .store
                .get_deployment("acme", &id)
                .await?
                .ok_or("stored")?;
            let mut next = current.value.clone();
            next.clone_source = Some(CloneSource {
                source_deployment_id: "0193a0c4e1f07d2a8b9c0d1e2f3a4b5c".into(),
                repository: "fb".into(),
                registered_as: "fb".into(),
                snapshot: "nightly-1".into(),
                snapshot_sort_millis: 0,
                mode,
                pinned: false,
                snapshot_version: None,
                license: None,
            });
            app.store.replace_deployment(&next, &current, None).await?;
            Ok::<(), Box<dyn std::error::Error>>(())
        }
    };
    as_clone(RestoreMode::Mount).await?;
    let with_repository = |repo: &str| {
        let mut s = spec(1)?;
        s.snapshot = Some(floe_domain::deployment::SnapshotAttachment {
            repository: Some(repo.into()),
            policies: vec![],
        });
        Ok::<DeploymentSpec, serde_json::Error>(s)
    };
    let refused = w
        .app
        .update_deployment(&who, &view.id, None, with_repository("fb")?)
        .await;
    assert!(
        matches!(&refused, Err(AppError::Conflict { code: Code::RESTORE_SOURCE_PATH_READ_ONLY, field: Some(f), .. }) if f == "snapshot.repository"),
        "{refused:?}"
    );
    let refused = w
        .app
        .update_deployment(&who, &view.id, None, with_repository("other")?)
        .await;
    match &refused {
        Err(AppError::Invalid(invalid)) => {
            assert_eq!(invalid.0[0].code, "restore.repository_unreachable");
            assert_eq!(invalid.0[0].field, "snapshot.repository");
        }
        other => return Err(format!("not refused: {other:?}").into()),
    }
    // Nothing changed.
    let stored = w
        .app
        .store
        .get_deployment("acme", &view.id)
        .await?
        .ok_or("stored")?;
    assert_eq!(stored.value.spec.repository(), None);

    // A restore clone holds its own copy: `fb` may be its repository.
    as_clone(RestoreMode::Restore).await?;
    let updated = w
        .app
        .update_deployment(&who, &view.id, None, with_repository("fb")?)
        .await?;
    assert!(
        updated.plans.pending.is_some(),
        "an update plan registers it"
    );
    Ok(())
}

async fn stored_deployment(
    app: &App,
    id: &str,
) -> Result<floe_store::Versioned<floe_domain::deployment::Deployment>, Box<dyn std::error::Error>>
{
    Ok(app
        .store
        .get_deployment("acme", id)
        .await?
        .ok_or("the deployment is stored")?)
}

/// A view shown before is answered again without decoding its record, but
/// only while the record is as it was: a change of spec (a new version) and
/// a health check's write (which keeps the version) are both shown at once,
/// in a read of one deployment and in a page. A read with no write since
/// the last one is answered without asking the store; after any write, the
/// next read asks again.
#[tokio::test]
async fn a_kept_view_is_never_older_than_its_record() -> TestResult {
    let w = world()?;
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let reader = caller(&[Role::DeploymentViewer]).reader()?;
    let id = created(w.app.create_deployment(&who, spec(1)?, None).await?)?.id;
    let page = || crate::deployments::DeploymentQuery::default();
    let shown =
        |json: &str| -> Result<serde_json::Value, serde_json::Error> { serde_json::from_str(json) };

    w.backend.take();
    let first = w.app.show_deployment(&reader, &id).await?;
    assert_eq!(w.backend.take(), ["get"]);
    let again = w.app.show_deployment(&reader, &id).await?;
    assert_eq!(first.json(), again.json());
    assert_eq!(w.app.views.usage().0, 1, "the view was not kept");
    assert!(w.backend.take().is_empty(), "nothing written, nothing read");
    let listed = w.app.list_deployments(&reader, page()).await?;
    assert_eq!(w.backend.take(), ["list"]);
    assert_eq!(listed.deployments.len(), 1);
    assert_eq!(listed.deployments[0].json(), first.json());

    // A health write keeps the version and changes the body.
    let stored = stored_deployment(&w.app, &id).await?;
    let health = floe_domain::health::Health {
        healthy: false,
        reason: Some("node group hot has 0 of 1 nodes running".into()),
        nodes: Vec::new(),
        warnings: Vec::new(),
        since: chrono::Utc::now(),
        heal_started: None,
        recovery_point: None,
        recovery_point_breached: None,
    };
    w.app.store.record_health(&stored, &health).await?;
    w.backend.take();
    let after_health = w.app.show_deployment(&reader, &id).await?;
    assert_eq!(w.backend.take(), ["get"], "a write was made: read again");
    assert_eq!(after_health.version(), first.version());
    let body = shown(after_health.json())?;
    assert_eq!(body["healthy"], json!(false), "{body}");
    assert_eq!(
        body["health_reason"],
        json!("node group hot has 0 of 1 nodes running")
    );
    let listed = w.app.list_deployments(&reader, page()).await?;
    assert_eq!(listed.deployments[0].json(), after_health.json());

    // A change of spec is a new version.
    let stored = stored_deployment(&w.app, &id).await?;
    let mut renamed = stored.value.clone();
    renamed.spec.name = "renamed".into();
    w.app
        .store
        .replace_deployment(&renamed, &stored, None)
        .await?;
    let after_rename = w.app.show_deployment(&reader, &id).await?;
    assert!(after_rename.version() > first.version());
    assert_eq!(shown(after_rename.json())?["name"], json!("renamed"));
    assert_eq!(
        shown(after_rename.json())?["resource_version"],
        json!(after_rename.version())
    );
    let listed = w.app.list_deployments(&reader, page()).await?;
    assert_eq!(listed.deployments[0].json(), after_rename.json());

    // Another organization's reader is answered from its own records only.
    let stranger = Caller {
        org: "other".into(),
        ..caller(&[Role::DeploymentViewer])
    }
    .reader()?;
    let refused = w.app.show_deployment(&stranger, &id).await;
    assert_eq!(
        refused.err(),
        Some(AppError::not_found(Resource::Deployment, &id))
    );
    assert!(
        w.app
            .list_deployments(&stranger, page())
            .await?
            .deployments
            .is_empty()
    );
    Ok(())
}

/// Reads racing writes, on a file (reads on their own connections) and two
/// worker threads: a view answered without a read must never be older
/// than the record. After each write returns, the writer's own read shows
/// it; no reader ever sees the version go back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_answered_without_a_read_is_never_older_than_a_write()
-> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let dir = tempfile::tempdir()?;
    let inner = SqliteBackend::open(&dir.path().join("floe.db")).map_err(|e| e.to_string())?;
    let World { app, .. } = world_on(inner).map_err(|e| e.to_string())?;
    let app = Arc::new(app);
    let who = caller(&[Role::DeploymentManager]).manager()?;
    let reader = caller(&[Role::DeploymentViewer]).reader()?;
    let id = created(app.create_deployment(&who, spec(1)?, None).await?)?.id;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..3 {
        let (app, reader, id, done) = (app.clone(), reader.clone(), id.clone(), done.clone());
        readers.push(tokio::spawn(async move {
            let mut last = 0;
            let mut reads = 0u32;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let v = app
                    .show_deployment(&reader, &id)
                    .await
                    .map_err(|e| e.to_string())?
                    .version();
                if v < last {
                    return Err(format!("read version {v} after {last}"));
                }
                last = v;
                reads += 1;
                tokio::task::yield_now().await;
            }
            Ok::<u32, String>(reads)
        }));
    }
    for i in 0..150 {
        let stored = app
            .store
            .get_deployment("acme", &id)
            .await?
            .ok_or("the deployment is stored")?;
        let mut renamed = stored.value.clone();
        renamed.spec.name = format!("name-{i}");
        let version = if i % 3 == 0 {
            // A write that keeps the version: only the body tells.
            renamed.health = Some(floe_domain::health::Health {
                healthy: i % 2 == 0,
                reason: Some(format!("check {i}")),
                warnings: Vec::new(),
                nodes: Vec::new(),
                since: chrono::Utc::now(),
                heal_started: None,
                recovery_point: None,
                recovery_point_breached: None,
            });
            app.store
                .record_health(&stored, renamed.health.as_ref().ok_or("health")?)
                .await?;
            stored.version
        } else {
            app.store
                .replace_deployment(&renamed, &stored, None)
                .await?
        };
        let shown = app.show_deployment(&reader, &id).await?;
        let body: serde_json::Value = serde_json::from_str(shown.json())?;
        assert_eq!(shown.version(), version, "write {i}");
        if i % 3 == 0 {
            assert_eq!(
                body["health_reason"],
                json!(format!("check {i}")),
                "write {i}"
            );
        } else {
            assert_eq!(body["name"], json!(format!("name-{i}")), "write {i}");
        }
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.await?? > 0, "a reader never read");
    }
    Ok(())
}
