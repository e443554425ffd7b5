//! The decisions alone: no store, no queue, no clock but the one passed in.

use super::*;
use floe_domain::Code;
use floe_domain::access::ClusterAccess;
use floe_domain::plan::PlanRef;
use floe_domain::restore::RestoreMode;
use serde_json::json;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn who() -> Caller {
    Caller {
        org: "acme".into(),
        subject: "alice".into(),
        issuer: "floe-local".into(),
        token_org: "acme".into(),
        roles: Vec::new(),
        api_key: None,
    }
}

fn now() -> DateTime<Utc> {
    Utc::now()
}

fn spec(count: u32) -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(json!({
        "name": "logs", "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.large",
                         "count": count, "zone_count": 1, "storage": {"size_gb": 20}}]
    }))
}

fn access() -> ClusterAccess {
    ClusterAccess {
        ca_cert_pem: "ca".into(),
        sealed_password: "sealed".into(),
        nodes: Vec::new(),
        http_port: 9200,
    }
}

fn pending(kind: PlanKind) -> Option<PlanRef> {
    Some(PlanRef {
        plan_id: "p1".into(),
        kind,
    })
}

/// Deployment `d1` at version 3 with a one-node spec.
fn record(
    status: DeploymentStatus,
    pending_plan: Option<PlanRef>,
    ran: bool,
) -> Result<Versioned<Deployment>, Box<dyn std::error::Error>> {
    let mut spec = spec(1)?;
    spec.normalize()?;
    Ok(Versioned {
        value: Deployment {
            last_drill: None,
            id: "d1".into(),
            org: "acme".into(),
            spec,
            status,
            pending_plan,
            access: ran.then(access),
            password_to_apply: None,
            endpoint: None,
            endpoint_moving_to: None,
            clone_source: None,
            health: None,
            created: now(),
            updated: now(),
            license: None,
        },
        version: 3,
        refs: 0,
    })
}

/// The stable code of a refusal, as the API shows it.
fn code(e: &AppError) -> String {
    match e {
        AppError::Conflict { code, .. } => code.to_string(),
        AppError::Invalid(i) => i.0.first().map(|f| f.code.to_string()).unwrap_or_default(),
        AppError::NotFound { .. } => "not_found".into(),
        AppError::PreconditionFailed { current } => format!("precondition_failed@{current}"),
        other => format!("{other:?}"),
    }
}

fn outcome<T>(r: Result<T, AppError>, ok: impl Fn(&T) -> String) -> String {
    match r {
        Ok(v) => ok(&v),
        Err(e) => code(&e),
    }
}

#[test]
fn a_create_request_is_checked_and_its_key_hashed_with_the_caller() -> TestResult {
    let refused = check_create(&who(), spec(1)?, Some("")).map(|_| ());
    assert_eq!(
        outcome(refused, |_| "ok".into()),
        "validation.idempotency_key"
    );
    let refused = check_create(&who(), spec(1)?, Some("a key")).map(|_| ());
    assert_eq!(
        outcome(refused, |_| "ok".into()),
        "validation.idempotency_key"
    );
    let refused = check_create(&who(), spec(0)?, None).map(|_| ());
    assert!(matches!(refused, Err(AppError::Invalid(_))), "{refused:?}");

    assert!(check_create(&who(), spec(1)?, None)?.idempotency.is_none());
    let key = |caller: &Caller| -> Result<Idempotency, Box<dyn std::error::Error>> {
        check_create(caller, spec(1)?, Some("k1"))?
            .idempotency
            .ok_or_else(|| "no idempotency".into())
    };
    let (alice, again) = (key(&who())?, key(&who())?);
    assert_eq!(alice, again);
    // The same `sub` is another person at another issuer or organization
    // (issue 33: a platform token of another organization with alice's
    // `sub` was answered her create's password).
    let bob = Caller {
        subject: "bob".into(),
        ..who()
    };
    let foreign_org = Caller {
        token_org: "globex".into(),
        ..who()
    };
    let foreign_issuer = Caller {
        issuer: "https://idp.example.com".into(),
        ..who()
    };
    for other in [bob, foreign_org, foreign_issuer] {
        let theirs = key(&other)?;
        assert_eq!(alice.key_hash, theirs.key_hash);
        assert_ne!(alice.request_hash, theirs.request_hash, "{other:?}");
    }
    Ok(())
}

#[test]
fn a_create_decides_an_initializing_record_with_its_create_plan() -> TestResult {
    let clone = ResolvedClone {
        warnings: vec!["mind the cache".into()],
        snapshot_sort_millis: None,
        snapshot_version: None,
    };
    let new = decide_create(
        &who(),
        "d1",
        check_create(&who(), spec(1)?, None)?.spec,
        clone,
        Some("d1.es.floe.internal".into()),
        now(),
    );
    assert_eq!(new.deployment.id, "d1");
    assert_eq!(
        new.deployment.endpoint.as_deref(),
        Some("d1.es.floe.internal")
    );
    assert_eq!(new.deployment.status, DeploymentStatus::Initializing);
    assert_eq!(new.deployment.pending_plan, Some(new.plan.reference()));
    assert_eq!(new.plan.kind(), PlanKind::Create);
    assert_eq!(
        (new.plan.org.as_str(), new.plan.deployment_id.as_str()),
        ("acme", "d1")
    );
    assert!(
        new.deployment.password_to_apply.is_none(),
        "applying makes it"
    );
    assert!(new.deployment.clone_source.is_none());

    let shown = new.validation();
    assert_eq!(shown.outcome, ValidationOutcome::Create);
    assert_eq!(shown.deployment.warnings, ["mind the cache"]);
    assert!(shown.deployment.credentials.is_none());
    let steps = shown.plan.map(|p| (p.kind, p.steps.is_empty()));
    assert_eq!(steps, Some((PlanKind::Create, false)));
    Ok(())
}

#[test]
fn a_replace_request_is_checked_against_the_record() -> TestResult {
    let d = record(DeploymentStatus::Running, None, true)?;
    let none = ReadOnlyFields::default();
    let stale = check_replace(&d, Some(2), spec(1)?, &none).map(|_| ());
    assert_eq!(outcome(stale, |_| "ok".into()), "precondition_failed@3");
    let mut clone = spec(1)?;
    clone.restore_snapshot = Some(serde_json::from_value(
        json!({"source_deployment_id": floe_domain::names::new_resource_id(), "snapshot_name": "s1"}),
    )?);
    let create_only = check_replace(&d, None, clone, &none).map(|_| ());
    assert_eq!(
        outcome(create_only, |_| "ok".into()),
        "validation.create_only"
    );
    let checked = check_replace(&d, Some(3), spec(2)?, &none)?;
    assert_eq!(checked.precondition, Some(3));
    assert_eq!(checked.spec.node_groups[0].count, 2);
    Ok(())
}

#[test]
fn a_replace_records_or_plans_by_status_and_change() -> TestResult {
    use DeploymentStatus::*;
    // (status, pending plan, ran, new node count, version) -> outcome
    let cases = [
        (Running, None, true, 1, "8.15.3", "record"),
        (
            Running,
            None,
            true,
            2,
            "8.15.3",
            "plan update reconfiguring",
        ),
        (
            Running,
            pending(PlanKind::Restore),
            true,
            2,
            "8.15.3",
            "deployments.plan_in_progress",
        ),
        (
            Running,
            pending(PlanKind::Restore),
            true,
            1,
            "8.15.3",
            "record",
        ),
        (
            Running,
            None,
            true,
            1,
            "8.14.0",
            "deployments.version_change",
        ),
        (Stopped, None, true, 2, "8.14.0", "record"),
        (
            Stopped,
            pending(PlanKind::Delete),
            true,
            2,
            "8.15.3",
            "record",
        ),
        (Failed, None, true, 1, "8.15.3", "plan update reconfiguring"),
        (Failed, None, false, 1, "8.15.3", "plan start initializing"),
        (
            Failed,
            pending(PlanKind::Create),
            false,
            1,
            "8.15.3",
            "deployments.plan_in_progress",
        ),
        (
            Initializing,
            None,
            false,
            2,
            "8.15.3",
            "deployments.not_running",
        ),
        (Stopping, None, true, 2, "8.15.3", "deployments.not_running"),
    ];
    for (status, plan, ran, count, version, expected) in cases {
        let d = record(status, plan, ran)?;
        let mut next = spec(count)?;
        next.version = version.into();
        let next = check_replace(&d, None, next, &ReadOnlyFields::default())?.spec;
        let decided = decide_replace(&d, next, &NamedRecords::default(), &who(), now(), None);
        let got = outcome(decided, |r| match r {
            Replacement::Record(next) => {
                assert_eq!(next.status, status, "a record change keeps the status");
                "record".into()
            }
            Replacement::Plan { next, plan } => {
                format!("plan {} {}", plan.kind().as_str(), next.status.as_str())
            }
        });
        assert_eq!(
            got, expected,
            "{status:?} ran={ran} count={count} {version}"
        );
    }
    Ok(())
}

#[test]
fn a_replace_shows_the_target_it_would_run() -> TestResult {
    let d = record(DeploymentStatus::Running, None, true)?;
    let mut renamed = spec(1)?;
    renamed.name = "logs-renamed".into();
    let named = NamedRecords::default();
    let record_change = decide_replace(&d, renamed, &named, &who(), now(), None)?;
    assert!(record_change.plan().is_none());
    let shown = record_change.validation(&d);
    assert_eq!(shown.outcome, ValidationOutcome::Record);
    assert_eq!(
        (
            shown.deployment.name.as_str(),
            shown.deployment.resource_version
        ),
        ("logs-renamed", 3)
    );

    let resize = check_replace(&d, None, spec(2)?, &ReadOnlyFields::default())?.spec;
    let planned = decide_replace(&d, resize, &named, &who(), now(), None)?;
    // The record keeps the running spec; the plan carries the target.
    let Replacement::Plan { next, plan } = &planned else {
        return Err("a resize is recorded at once".into());
    };
    assert_eq!(next.spec.node_groups[0].count, 1);
    assert_eq!(next.pending_plan, Some(plan.reference()));
    assert_eq!(planned.target_spec().node_groups[0].count, 2);
    let shown = planned.validation(&d);
    assert_eq!(shown.outcome, ValidationOutcome::Plan);
    assert_eq!(shown.plan.map(|p| p.kind), Some(PlanKind::Update));
    assert!(
        shown.deployment.plans.pending.is_none(),
        "nothing was recorded"
    );
    Ok(())
}

#[test]
fn a_mount_clone_keeps_its_sources_name_off_its_own_path() -> TestResult {
    let mut d = record(DeploymentStatus::Running, None, true)?;
    d.value.clone_source = Some(CloneSource {
        source_deployment_id: "d0".into(),
        repository: "fb".into(),
        registered_as: "fb".into(),
        snapshot: "s1".into(),
        snapshot_sort_millis: 0,
        mode: RestoreMode::Mount,
        pinned: true,
        snapshot_version: None,
        license: None,
    });
    let mut own = spec(1)?;
    own.snapshot = Some(serde_json::from_value(json!({"repository": "fb"}))?);
    let refused = decide_replace(&d, own, &NamedRecords::default(), &who(), now(), None);
    assert!(
        matches!(&refused, Err(AppError::Conflict { code: Code::RESTORE_SOURCE_PATH_READ_ONLY, field: Some(f), .. }) if f == "snapshot.repository"),
        "{refused:?}"
    );
    let through_policy = NamedRecords {
        repositories: None,
        policy_repositories: vec![Some("other".into()), Some("fb".into())],
    };
    let refused = decide_replace(&d, spec(1)?, &through_policy, &who(), now(), None);
    assert!(
        matches!(&refused, Err(AppError::Conflict { code: Code::RESTORE_SOURCE_PATH_READ_ONLY, field: Some(f), .. }) if f == "snapshot.policies[1]"),
        "{refused:?}"
    );
    // A restore clone no longer reads its source: the name is its own.
    if let Some(src) = d.value.clone_source.as_mut() {
        src.mode = RestoreMode::Restore;
    }
    assert!(decide_replace(&d, spec(1)?, &through_policy, &who(), now(), None).is_ok());
    Ok(())
}

#[test]
fn start_shutdown_delete_and_reset_share_their_checks() -> TestResult {
    use DeploymentStatus::*;
    use Lifecycle::*;
    let busy = || pending(PlanKind::Update);
    // (operation, status, pending plan, ran) -> outcome
    let cases = [
        (Start, Stopped, None, true, "ok"),
        (Start, Running, None, true, "deployments.not_stopped"),
        (Start, Stopped, busy(), true, "deployments.plan_in_progress"),
        (Start, Running, busy(), true, "deployments.plan_in_progress"),
        (Shutdown, Running, None, true, "ok"),
        (Shutdown, Failed, None, false, "ok"),
        (Shutdown, Stopped, None, true, "deployments.already_stopped"),
        (
            Shutdown,
            Stopped,
            busy(),
            true,
            "deployments.plan_in_progress",
        ),
        (Delete, Stopped, None, true, "ok"),
        (
            Delete,
            Running,
            None,
            true,
            "deployments.deployment_not_stopped",
        ),
        // A delete names the status first, the others the plan.
        (
            Delete,
            Stopping,
            busy(),
            true,
            "deployments.deployment_not_stopped",
        ),
        (
            Delete,
            Stopped,
            busy(),
            true,
            "deployments.plan_in_progress",
        ),
        (ResetPassword, Running, None, true, "ok"),
        (
            ResetPassword,
            Running,
            None,
            false,
            "deployments.not_running",
        ),
        (ResetPassword, Failed, None, true, "deployments.not_running"),
        (
            ResetPassword,
            Running,
            busy(),
            true,
            "deployments.plan_in_progress",
        ),
    ];
    for (op, status, plan, ran, expected) in cases {
        let d = record(status, plan, ran)?;
        let got = outcome(lifecycle_allowed(&d.value, op), |_| "ok".into());
        assert_eq!(got, expected, "{op:?} {status:?} ran={ran}");
    }
    Ok(())
}

#[test]
fn a_delete_answers_its_pending_plan_and_checks_the_version_first() -> TestResult {
    let show = |r: Result<Deletion, AppError>| outcome(r, |d| format!("{d:?}"));
    let stopped = record(DeploymentStatus::Stopped, None, true)?;
    assert_eq!(show(decide_delete(&stopped, None)), "Plan");
    assert_eq!(show(decide_delete(&stopped, Some(3))), "Plan");
    assert_eq!(
        show(decide_delete(&stopped, Some(1))),
        "precondition_failed@3"
    );
    let deleting = record(DeploymentStatus::Stopping, pending(PlanKind::Delete), true)?;
    assert_eq!(show(decide_delete(&deleting, None)), "Pending");
    assert_eq!(
        show(decide_delete(&deleting, Some(1))),
        "precondition_failed@3"
    );
    Ok(())
}

#[test]
fn a_password_is_reset_through_the_elasticsearch_resource_only() -> TestResult {
    let d = record(DeploymentStatus::Running, None, true)?;
    assert!(decide_reset_password(&d.value, floe_domain::access::ELASTICSEARCH_REF_ID).is_ok());
    // An unknown resource is absent before any other check.
    let busy = record(DeploymentStatus::Stopped, pending(PlanKind::Update), false)?;
    let refused = decide_reset_password(&busy.value, "main-kibana");
    assert_eq!(
        refused,
        Err(AppError::not_found(
            Resource::Elasticsearch,
            "d1/main-kibana"
        ))
    );
    Ok(())
}

#[test]
fn a_listing_checks_its_status_and_tag() -> TestResult {
    let query = |status: Option<&str>, tag: Option<&str>| DeploymentQuery {
        status: status.map(Into::into),
        tag: tag.map(Into::into),
        ..Default::default()
    };
    let cases = [
        (None, None, "ok"),
        (Some("running"), Some("team:search"), "ok"),
        (Some("asleep"), None, "validation.unknown_value"),
        (None, Some("team"), "validation.tag"),
        (None, Some(":search"), "validation.tag"),
        (None, Some("team:"), "validation.tag"),
        (None, Some("team:a:b"), "ok"),
    ];
    for (status, tag, expected) in cases {
        let got = outcome(listing_filter(query(status, tag)), |_| "ok".into());
        assert_eq!(got, expected, "{status:?} {tag:?}");
    }
    let Listing { filter, tag, .. } = listing_filter(DeploymentQuery {
        name_prefix: Some("lo".into()),
        ..query(Some("running"), Some("team:search"))
    })?;
    assert_eq!(filter.status.as_deref(), Some("running"));
    assert_eq!(filter.tag.as_deref(), Some("team:search"));
    assert_eq!(
        tag,
        Some(Tag {
            key: "team".into(),
            value: "search".into()
        })
    );
    // Split at the first ':' (issue 33): a value may hold one.
    let Listing { tag, .. } = listing_filter(query(None, Some("a:b:c")))?;
    assert_eq!(
        tag,
        Some(Tag {
            key: "a".into(),
            value: "b:c".into()
        })
    );
    assert_eq!(filter.name_prefix.as_deref(), Some("lo"));
    Ok(())
}

/// A running deployment without an endpoint moves to the one offered with
/// its next update, even one that changes nothing else; one with an
/// endpoint, a stopped one, or one that never ran does not.
#[test]
fn an_update_moves_a_deployment_without_an_endpoint_to_one() -> TestResult {
    let to = || Some("d1.es.floe.internal".to_string());
    let named = NamedRecords::default();
    let d = record(DeploymentStatus::Running, None, true)?;
    let same = check_replace(&d, None, spec(1)?, &ReadOnlyFields::default())?.spec;
    let Replacement::Plan { next, plan } =
        decide_replace(&d, same.clone(), &named, &who(), now(), to())?
    else {
        return Err("the move needs a plan".into());
    };
    assert_eq!(plan.kind(), PlanKind::Update);
    assert_eq!(
        next.endpoint, None,
        "the record takes it when the plan succeeds"
    );
    assert_eq!(next.endpoint_moving_to, to());
    let mut shown = next.clone();
    if let Some(a) = &mut shown.access {
        a.nodes.push(floe_domain::access::NodeEndpoint {
            name: "i-1".into(),
            address: "10.0.1.7".into(),
        });
    }
    let view = floe_domain::deployment::DeploymentView::new(&shown, 4);
    let es = view.elasticsearch.ok_or("no elasticsearch")?;
    assert!(!es.stable_endpoint);
    assert_eq!(
        es.moving_to_endpoint.as_deref(),
        Some("https://d1.es.floe.internal:9200")
    );
    // Nothing offered: an unchanged spec is a record change.
    let unchanged = decide_replace(&d, same.clone(), &named, &who(), now(), None)?;
    assert!(unchanged.plan().is_none());

    let mut has_one = d.clone();
    has_one.value.endpoint = Some("d1.es.floe.internal".into());
    assert!(
        decide_replace(&has_one, same.clone(), &named, &who(), now(), to())?
            .plan()
            .is_none()
    );
    let stopped = record(DeploymentStatus::Stopped, None, true)?;
    let decided = decide_replace(&stopped, same.clone(), &named, &who(), now(), to())?;
    assert!(decided.plan().is_none());
    let never_ran = record(DeploymentStatus::Failed, None, false)?;
    if let Replacement::Plan { next, plan } =
        decide_replace(&never_ran, same, &named, &who(), now(), to())?
    {
        assert_eq!(plan.kind(), PlanKind::Start);
        assert_eq!(next.endpoint_moving_to, None);
    }
    Ok(())
}
