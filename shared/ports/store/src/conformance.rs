//! One conformance suite, run unchanged against every storage adapter
//! (`floe-store-sqlite` on a temporary file, `floe-store-dynamo` on moto
//! through the real `aws-sdk-dynamodb` client). Each scenario takes a
//! [`Store`] over a fresh backend; [`conformance_suite!`](crate::conformance_suite)
//! makes one test per scenario in the adapter's own tests:
//!
//! ```ignore
//! async fn store() -> Result<(Store, impl Sized), Box<dyn std::error::Error>> { ... }
//! floe_store::conformance_suite!(store);
//! ```
//!
//! The second value of the pair is kept alive for the test's length (a
//! temporary directory, say).

use crate::{Filter, Idempotency, Kind, PageRequest, Store, StoreError};
use chrono::Utc;
use floe_domain::deployment::{
    Deployment, DeploymentSpec, DeploymentStatus, Metadata, NodeGroup, NodeRole,
    SnapshotAttachment, Storage, Tag, VolumeType,
};
use floe_domain::names::new_resource_id;
use floe_domain::plan::{Plan, PlanParams};
use floe_domain::policy::{Policy, PolicySpec, Schedule, ScheduleExpression};
use floe_domain::repository::{FsSettings, Repository, RepositorySettings};
use floe_domain::snapshot::{
    FormerDeployment, PolicyRun, SnapshotRecord, SnapshotShards, SnapshotState,
};
use std::collections::BTreeMap;

/// What every scenario returns: an error names what the adapter got wrong.
pub type TestResult = Result<(), Box<dyn std::error::Error>>;

fn repo(org: &str, name: &str) -> Repository {
    let now = Utc::now();
    Repository {
        org: org.into(),
        name: name.into(),
        settings: RepositorySettings::Fs(FsSettings {
            location: format!("/snapshots/{name}"),
            compress: None,
            max_snapshot_bytes_per_sec: Some("150mb".into()),
            max_restore_bytes_per_sec: None,
        }),
        created: now,
        updated: now,
    }
}

fn policy(org: &str, repository: &str) -> Policy {
    let now = Utc::now();
    Policy {
        id: new_resource_id(),
        org: org.into(),
        spec: PolicySpec {
            name: "every-30m".into(),
            schedule: Schedule {
                interval: Some("30m".into()),
                cron: None,
                timezone: None,
            },
            snapshot_name: "<floe-{now/d}>".into(),
            repository: repository.into(),
            indices: vec![],
            include_global_state: true,
            retention: None,
            enabled: true,
        },
        schedule_expression: ScheduleExpression {
            expression: "rate(30 minutes)".into(),
            timezone: "UTC".into(),
        },
        created: now,
        updated: now,
    }
}

fn deployment(
    org: &str,
    name: &str,
    repository: Option<&str>,
    policies: &[&str],
    tags: &[(&str, &str)],
) -> (Deployment, Plan) {
    let now = Utc::now();
    let id = new_resource_id();
    let spec = DeploymentSpec {
        recovery_targets: None,
        drill_schedule: None,
        name: name.into(),
        version: "8.15.3".into(),
        node_groups: vec![NodeGroup {
            id: "hot".into(),
            roles: vec![NodeRole::Master, NodeRole::DataHot],
            instance_type: "m6g.xlarge".into(),
            count: 3,
            zone_count: 3,
            storage: Storage {
                size_gb: 100,
                volume_type: VolumeType::Gp3,
                iops: None,
                throughput: None,
            },
            shared_cache: None,
        }],
        user_settings: BTreeMap::new(),
        snapshot: Some(SnapshotAttachment {
            repository: repository.map(str::to_string),
            policies: policies.iter().map(|p| p.to_string()).collect(),
        }),
        metadata: Metadata {
            tags: tags
                .iter()
                .map(|(k, v)| Tag {
                    key: k.to_string(),
                    value: v.to_string(),
                })
                .collect(),
        },
        restore_snapshot: None,
    };
    let p = Plan::new(
        org,
        &id,
        PlanParams::Create(spec.clone()),
        "deployments.create",
        "tester",
        now,
    );
    let d = Deployment {
        last_drill: None,
        id: id.clone(),
        org: org.into(),
        spec,
        status: DeploymentStatus::Initializing,
        pending_plan: Some(p.reference()),
        access: None,
        password_to_apply: None,
        endpoint: None,
        endpoint_moving_to: None,
        clone_source: None,
        health: None,
        created: now,
        updated: now,
        license: None,
    };
    (d, p)
}

/// A fresh organization per test keeps tests independent on a shared table.
fn org() -> String {
    format!("org-{}", &new_resource_id()[20..])
}

pub async fn repositories_round_trip(store: Store) -> TestResult {
    let org = org();
    let r = repo(&org, "main");
    store.create_repository(&r).await?;
    assert_eq!(
        store.create_repository(&r).await,
        Err(StoreError::AlreadyExists)
    );
    let got = store.get_repository(&org, "main").await?.ok_or("missing")?;
    assert_eq!(
        (got.value.clone(), got.version, got.refs),
        (r.clone(), 1, 0)
    );

    let mut changed = r.clone();
    changed.settings = RepositorySettings::Fs(FsSettings {
        location: "/elsewhere".into(),
        compress: Some(true),
        max_snapshot_bytes_per_sec: None,
        max_restore_bytes_per_sec: None,
    });
    assert_eq!(store.replace_repository(&changed, 1).await?, 2);
    assert_eq!(
        store.replace_repository(&changed, 1).await,
        Err(StoreError::VersionMismatch { current: 2 })
    );
    let got = store.get_repository(&org, "main").await?.ok_or("missing")?;
    assert_eq!((got.value, got.version), (changed, 2));

    assert_eq!(
        store.delete_repository(&org, "main", 1).await,
        Err(StoreError::VersionMismatch { current: 2 })
    );
    store.delete_repository(&org, "main", 2).await?;
    assert!(store.get_repository(&org, "main").await?.is_none());
    assert_eq!(
        store.delete_repository(&org, "main", 2).await,
        Err(StoreError::NotFound)
    );
    Ok(())
}

pub async fn organizations_are_isolated(store: Store) -> TestResult {
    let (a, b) = (org(), org());
    store.create_repository(&repo(&a, "shared-name")).await?;
    assert!(store.get_repository(&b, "shared-name").await?.is_none());
    assert!(
        store
            .list_repositories(&b, &PageRequest::default())
            .await?
            .items
            .is_empty()
    );
    // The same name in another organization is another record.
    store.create_repository(&repo(&b, "shared-name")).await?;
    // A policy cannot reference another organization's repository.
    let p = policy(&a, "only-in-b");
    store.create_repository(&repo(&b, "only-in-b")).await?;
    assert_eq!(
        store.create_policy(&p).await,
        Err(StoreError::MissingReference {
            kind: Kind::Repository,
            key: "only-in-b".into()
        })
    );
    Ok(())
}

pub async fn references_guard_deletes(store: Store) -> TestResult {
    let org = org();
    store.create_repository(&repo(&org, "backups")).await?;
    let p = policy(&org, "backups");
    store.create_policy(&p).await?;
    let (d, plan) = deployment(&org, "logs", Some("backups"), &[&p.id], &[]);
    store.create_deployment(&d, &plan, None).await?;

    let r = store
        .get_repository(&org, "backups")
        .await?
        .ok_or("missing")?;
    assert_eq!(
        r.refs, 2,
        "the policy and the deployment use the repository"
    );
    assert_eq!(
        store.delete_repository(&org, "backups", r.version).await,
        Err(StoreError::InUse { refs: 2 })
    );
    let pv = store.get_policy(&org, &p.id).await?.ok_or("missing")?;
    assert_eq!(pv.refs, 1);
    assert_eq!(
        store.delete_policy(&pv).await,
        Err(StoreError::InUse { refs: 1 })
    );

    // Deleting the deployment releases both references; then the policy, then the repository.
    let dv = store.get_deployment(&org, &d.id).await?.ok_or("missing")?;
    store.delete_deployment(&dv).await?;
    let pv = store.get_policy(&org, &p.id).await?.ok_or("missing")?;
    assert_eq!(pv.refs, 0);
    store.delete_policy(&pv).await?;
    let r = store
        .get_repository(&org, "backups")
        .await?
        .ok_or("missing")?;
    assert_eq!(r.refs, 0);
    store.delete_repository(&org, "backups", r.version).await?;
    Ok(())
}

pub async fn dangling_references_write_nothing(store: Store) -> TestResult {
    let org = org();
    store.create_repository(&repo(&org, "backups")).await?;
    let missing_policy = new_resource_id();
    let (d, plan) = deployment(&org, "logs", Some("backups"), &[&missing_policy], &[]);
    assert_eq!(
        store.create_deployment(&d, &plan, None).await,
        Err(StoreError::MissingReference {
            kind: Kind::Policy,
            key: missing_policy
        })
    );
    assert!(store.get_deployment(&org, &d.id).await?.is_none());
    assert!(store.get_plan(&org, &d.id, &plan.id).await?.is_none());
    assert_eq!(
        store
            .get_repository(&org, "backups")
            .await?
            .ok_or("missing")?
            .refs,
        0,
        "no partial reference count"
    );

    let (d, plan) = deployment(&org, "logs", Some("nope"), &[], &[]);
    assert_eq!(
        store.create_deployment(&d, &plan, None).await,
        Err(StoreError::MissingReference {
            kind: Kind::Repository,
            key: "nope".into()
        })
    );
    Ok(())
}

pub async fn deployments_move_references_and_keep_plans(store: Store) -> TestResult {
    let org = org();
    store.create_repository(&repo(&org, "one")).await?;
    store.create_repository(&repo(&org, "two")).await?;
    let (d, plan) = deployment(&org, "logs", Some("one"), &[], &[]);
    store.create_deployment(&d, &plan, None).await?;
    let got = store
        .get_plan(&org, &d.id, &plan.id)
        .await?
        .ok_or("plan missing")?;
    assert_eq!(got.value, plan);

    let previous = store.get_deployment(&org, &d.id).await?.ok_or("missing")?;
    let mut next = previous.value.clone();
    next.spec.snapshot = Some(SnapshotAttachment {
        repository: Some("two".into()),
        policies: vec![],
    });
    let (_, update_plan) = deployment(&org, "x", None, &[], &[]);
    let update_plan = Plan {
        deployment_id: d.id.clone(),
        params: PlanParams::Update(next.spec.clone()),
        ..update_plan
    };
    assert_eq!(
        store
            .replace_deployment(&next, &previous, Some(&update_plan))
            .await?,
        2
    );
    assert_eq!(
        store
            .get_repository(&org, "one")
            .await?
            .ok_or("missing")?
            .refs,
        0
    );
    assert_eq!(
        store
            .get_repository(&org, "two")
            .await?
            .ok_or("missing")?
            .refs,
        1
    );
    let plans = store
        .list_plans(&org, &d.id, &PageRequest::default())
        .await?;
    assert_eq!(plans.items.len(), 2);

    // A stale writer loses and changes nothing.
    assert_eq!(
        store.replace_deployment(&next, &previous, None).await,
        Err(StoreError::VersionMismatch { current: 2 })
    );
    assert_eq!(
        store
            .get_repository(&org, "two")
            .await?
            .ok_or("missing")?
            .refs,
        1
    );
    Ok(())
}

pub async fn lists_page_and_filter(store: Store) -> TestResult {
    let org = org();
    let mut ids = Vec::new();
    for (i, name) in ["alpha-1", "alpha-2", "beta-1", "alpha-3", "gamma-1"]
        .iter()
        .enumerate()
    {
        let tags: &[(&str, &str)] = if i % 2 == 0 {
            &[("team", "search")]
        } else {
            &[("team", "obs")]
        };
        let (mut d, plan) = deployment(&org, name, None, &[], tags);
        if i == 4 {
            d.status = DeploymentStatus::Running;
        }
        store.create_deployment(&d, &plan, None).await?;
        ids.push(d.id);
    }

    // Pages of 2 over 5: every deployment once, in creation order.
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let page = store
            .list_deployments(
                &org,
                Filter::default(),
                &PageRequest {
                    size: Some(2),
                    cursor: cursor.clone(),
                },
            )
            .await?;
        pages += 1;
        assert!(page.items.len() <= 2);
        seen.extend(page.items.into_iter().map(|v| v.value.id));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(seen, ids);

    let all = |filter: Filter| {
        let store = store.clone();
        let org = org.clone();
        async move {
            let mut names = Vec::new();
            let mut cursor = None;
            loop {
                let page = store
                    .list_deployments(
                        &org,
                        filter.clone(),
                        &PageRequest {
                            size: Some(2),
                            cursor,
                        },
                    )
                    .await?;
                names.extend(page.items.into_iter().map(|v| v.value.spec.name));
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => return Ok::<_, StoreError>(names),
                }
            }
        }
    };
    assert_eq!(
        all(Filter {
            name_prefix: Some("alpha".into()),
            ..Filter::default()
        })
        .await?,
        ["alpha-1", "alpha-2", "alpha-3"]
    );
    assert_eq!(
        all(Filter {
            status: Some("running".into()),
            ..Filter::default()
        })
        .await?,
        ["gamma-1"]
    );
    assert_eq!(
        all(Filter {
            tag: Some("team:search".into()),
            ..Filter::default()
        })
        .await?,
        ["alpha-1", "beta-1", "gamma-1"]
    );
    assert_eq!(
        all(Filter {
            tag: Some("team:search".into()),
            name_prefix: Some("alpha".into()),
            ..Filter::default()
        })
        .await?,
        ["alpha-1"]
    );

    assert_eq!(
        store
            .list_deployments(
                &org,
                Filter::default(),
                &PageRequest {
                    size: Some(2),
                    cursor: Some("%%%".into())
                }
            )
            .await,
        Err(StoreError::BadCursor)
    );
    Ok(())
}

pub async fn idempotency_keys(store: Store) -> TestResult {
    let org = org();
    let idem = Idempotency {
        key_hash: "k1".into(),
        request_hash: "h1".into(),
    };
    let (d, plan) = deployment(&org, "logs", None, &[], &[]);
    store.create_deployment(&d, &plan, Some(&idem)).await?;
    let first = store.get_idempotency(&org, "k1").await?.ok_or("missing")?;
    assert_eq!(
        (first.request_hash.as_str(), first.deployment_id.as_str()),
        ("h1", d.id.as_str())
    );

    let (d2, plan2) = deployment(&org, "logs", None, &[], &[]);
    assert_eq!(
        store.create_deployment(&d2, &plan2, Some(&idem)).await,
        Err(StoreError::IdempotencyKeyReused)
    );
    assert!(
        store.get_deployment(&org, &d2.id).await?.is_none(),
        "the losing create wrote nothing"
    );
    Ok(())
}

pub async fn concurrent_updates_one_wins(store: Store) -> TestResult {
    let org = org();
    store.create_repository(&repo(&org, "contended")).await?;
    let base = store
        .get_repository(&org, "contended")
        .await?
        .ok_or("missing")?;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = store.clone();
        let mut r = base.value.clone();
        r.settings = RepositorySettings::Fs(FsSettings {
            location: format!("/writer-{i}"),
            compress: None,
            max_snapshot_bytes_per_sec: None,
            max_restore_bytes_per_sec: None,
        });
        tasks.push(tokio::spawn(async move {
            store.replace_repository(&r, 1).await
        }));
    }
    let mut wins = 0;
    for t in tasks {
        match t.await? {
            Ok(2) => wins += 1,
            Err(StoreError::VersionMismatch { current: 2 }) => {}
            other => return Err(format!("unexpected outcome {other:?}").into()),
        }
    }
    assert_eq!(wins, 1, "exactly one writer with version 1 wins");
    assert_eq!(
        store
            .get_repository(&org, "contended")
            .await?
            .ok_or("missing")?
            .version,
        2
    );
    Ok(())
}

fn snapshot(
    org: &str,
    deployment_id: &str,
    name: &str,
    start_secs: i64,
    policy: Option<&str>,
) -> SnapshotRecord {
    let start = chrono::DateTime::from_timestamp(start_secs, 0).unwrap_or_default();
    SnapshotRecord {
        org: org.into(),
        deployment_id: deployment_id.into(),
        repository: "main".into(),
        name: name.into(),
        uuid: String::new(),
        state: SnapshotState::InProgress,
        start,
        end: None,
        duration_in_millis: None,
        indices: vec!["logs-1".into()],
        shards: SnapshotShards::default(),
        size_in_bytes: None,
        policy_id: policy.map(str::to_string),
        failure: None,
        sort_millis: start.timestamp_millis(),
        updated: start,
        deleting: None,
        place: None,
        missing: None,
        document_counts: None,
    }
}

pub async fn snapshots_newest_first_by_name_and_paged(store: Store) -> TestResult {
    let org = org();
    let dep = new_resource_id();
    let other = new_resource_id();
    // Inserted out of order; the list must come back newest first.
    let starts = [
        1_700_000_300,
        1_700_000_100,
        1_700_000_500,
        1_700_000_200,
        1_700_000_400,
    ];
    for (i, start) in starts.iter().enumerate() {
        let policy = if i % 2 == 0 { Some("pol-a") } else { None };
        store
            .create_snapshot(&snapshot(
                &org,
                &dep,
                &format!("snap-{start}"),
                *start,
                policy,
            ))
            .await?;
    }
    store
        .create_snapshot(&snapshot(&org, &other, "snap-other", 1_800_000_000, None))
        .await?;
    // A name is unique per deployment.
    assert_eq!(
        store
            .create_snapshot(&snapshot(
                &org,
                &dep,
                "snap-1700000300",
                1_600_000_000,
                None
            ))
            .await,
        Err(StoreError::AlreadyExists)
    );

    // Walked a page of two at a time, following the cursor.
    let mut names = Vec::new();
    let mut pages = store.snapshot_pages(&org, &dep, None).page_size(2);
    let mut read = 0;
    while let Some(items) = pages.next_page().await? {
        assert!(items.len() <= 2);
        read += 1;
        names.extend(items.iter().map(|v| v.value.name.clone()));
    }
    assert!(read >= 3, "{read} pages of two for five records");
    assert!(pages.next_page().await?.is_none(), "the walk stays ended");
    assert_eq!(
        names,
        [
            "snap-1700000500",
            "snap-1700000400",
            "snap-1700000300",
            "snap-1700000200",
            "snap-1700000100"
        ]
    );
    // Read whole, one policy's only, over pages of one.
    let all: Vec<_> = store
        .snapshot_pages(&org, &dep, Some("pol-a"))
        .page_size(1)
        .all()
        .await?
        .into_iter()
        .map(|v| v.value.name)
        .collect();
    assert_eq!(
        all,
        ["snap-1700000500", "snap-1700000400", "snap-1700000300"]
    );

    let by_policy = store
        .list_snapshots(
            &org,
            &dep,
            Some("pol-a"),
            &PageRequest {
                size: Some(100),
                cursor: None,
            },
        )
        .await?;
    let policy_names: Vec<_> = by_policy
        .items
        .iter()
        .map(|v| v.value.name.as_str())
        .collect();
    assert_eq!(
        policy_names,
        ["snap-1700000500", "snap-1700000400", "snap-1700000300"]
    );
    let manual = store
        .list_snapshots(
            &org,
            &dep,
            Some(""),
            &PageRequest {
                size: Some(100),
                cursor: None,
            },
        )
        .await?;
    assert_eq!(manual.items.len(), 2);

    // By name, updated in place (a later start time does not move it).
    let got = store
        .get_snapshot(&org, &dep, "snap-1700000300")
        .await?
        .ok_or("snapshot by name")?;
    let mut done = got.value.clone();
    done.state = SnapshotState::Success;
    done.uuid = "u-1".into();
    done.start += chrono::TimeDelta::seconds(3);
    done.size_in_bytes = Some(4096);
    let v = store.update_snapshot(&done, got.version).await?;
    assert_eq!(v, 2);
    assert!(matches!(
        store.update_snapshot(&done, got.version).await,
        Err(StoreError::VersionMismatch { current: 2 })
    ));
    let again = store
        .get_snapshot(&org, &dep, "snap-1700000300")
        .await?
        .ok_or("updated snapshot")?;
    assert_eq!(again.value, done);
    assert!(store.get_snapshot(&org, &dep, "nope").await?.is_none());
    assert!(
        store
            .get_snapshot(&org, &other, "snap-1700000300")
            .await?
            .is_none()
    );
    assert!(
        store
            .get_snapshot(&self::org(), &dep, "snap-1700000300")
            .await?
            .is_none()
    );

    // Deleting removes record and pointer: the name can be used again.
    store.delete_snapshot(&again).await?;
    assert!(
        store
            .get_snapshot(&org, &dep, "snap-1700000300")
            .await?
            .is_none()
    );
    assert_eq!(
        store.delete_snapshot(&again).await,
        Err(StoreError::NotFound)
    );
    store
        .create_snapshot(&snapshot(
            &org,
            &dep,
            "snap-1700000300",
            1_700_000_900,
            None,
        ))
        .await?;
    let first = store
        .list_snapshots(
            &org,
            &dep,
            None,
            &PageRequest {
                size: Some(1),
                cursor: None,
            },
        )
        .await?;
    assert_eq!(first.items[0].value.name, "snap-1700000300");

    // A cursor of one deployment's list is refused on another's.
    let cursor = first.next_cursor.ok_or("more pages")?;
    assert_eq!(
        store
            .list_snapshots(
                &org,
                &other,
                None,
                &PageRequest {
                    size: Some(1),
                    cursor: Some(cursor)
                }
            )
            .await,
        Err(StoreError::BadCursor)
    );
    Ok(())
}

pub async fn policy_runs_round_trip(store: Store) -> TestResult {
    let org = org();
    let dep = new_resource_id();
    assert!(store.get_policy_run(&org, &dep, "pol").await?.is_none());
    let mut run = PolicyRun::new(&org, &dep, "pol", Utc::now());
    run.last_skip_reason = Some("deployment is stopped".into());
    assert_eq!(store.save_policy_run(&run, None).await?, 1);
    assert_eq!(
        store.save_policy_run(&run, None).await,
        Err(StoreError::AlreadyExists)
    );
    run.consecutive_failures = 2;
    assert_eq!(store.save_policy_run(&run, Some(1)).await?, 2);
    assert!(matches!(
        store.save_policy_run(&run, Some(1)).await,
        Err(StoreError::VersionMismatch { current: 2 })
    ));
    let got = store
        .get_policy_run(&org, &dep, "pol")
        .await?
        .ok_or("run")?;
    assert_eq!((got.value, got.version), (run, 2));
    Ok(())
}

pub async fn active_plans_are_listed(store: Store) -> TestResult {
    let org = org();
    let (d, p) = deployment(&org, "active", None, &[], &[]);
    store.create_deployment(&d, &p, None).await?;
    let page = store.list_active_plans(&PageRequest::default()).await?;
    assert!(page.items.iter().any(|a| a.plan_id == p.id && a.org == org));
    Ok(())
}

/// A clone's dependency on its source: the source's repository counted,
/// the snapshot pinned (its record's refs, and a pin record naming the
/// clone) while `pinned`, released by an update or the clone's delete; a
/// pinned snapshot cannot be deleted, and a clone of a snapshot that is gone
/// writes nothing.
pub async fn clone_pins_guard_snapshots(store: Store) -> TestResult {
    use floe_domain::restore::{CloneSource, RestoreMode};
    let org = org();
    store.create_repository(&repo(&org, "main")).await?;
    let (source, plan) = deployment(&org, "source", Some("main"), &[], &[]);
    store.create_deployment(&source, &plan, None).await?;
    let mut snap = snapshot(&org, &source.id, "nightly-1", 1_700_000_000, None);
    snap.state = SnapshotState::Success;
    store.create_snapshot(&snap).await?;

    let pin_on = |name: &str, millis: i64| CloneSource {
        source_deployment_id: source.id.clone(),
        repository: "main".into(),
        registered_as: "main".into(),
        snapshot: name.into(),
        snapshot_sort_millis: millis,
        mode: RestoreMode::Mount,
        pinned: true,
        snapshot_version: None,
        license: None,
    };
    // A clone of a snapshot that does not exist writes nothing.
    let (mut orphan, plan) = deployment(&org, "orphan", None, &[], &[]);
    orphan.clone_source = Some(pin_on("gone", snap.sort_millis));
    match store.create_deployment(&orphan, &plan, None).await {
        Err(StoreError::MissingReference {
            kind: Kind::Snapshot,
            ..
        }) => {}
        other => return Err(format!("a clone of a missing snapshot: {other:?}").into()),
    }
    assert!(store.get_deployment(&org, &orphan.id).await?.is_none());

    let (mut clone, plan) = deployment(&org, "clone", None, &[], &[]);
    clone.clone_source = Some(pin_on(&snap.name, snap.sort_millis));
    store.create_deployment(&clone, &plan, None).await?;
    let refs = |name: &'static str| {
        let (store, org) = (store.clone(), org.clone());
        async move {
            Ok::<u64, Box<dyn std::error::Error>>(
                store
                    .get_repository(&org, name)
                    .await?
                    .ok_or("repository")?
                    .refs,
            )
        }
    };
    assert_eq!(refs("main").await?, 2, "the source and its clone");
    let stored = store
        .get_snapshot(&org, &source.id, &snap.name)
        .await?
        .ok_or("snapshot")?;
    assert_eq!(stored.refs, 1, "pinned");
    let pins = store.snapshot_pins(&org, &source.id, &snap.name).await?;
    assert_eq!(
        pins.iter()
            .map(|p| p.deployment_id.as_str())
            .collect::<Vec<_>>(),
        [clone.id.as_str()]
    );
    assert!(matches!(
        store.delete_snapshot(&stored).await,
        Err(StoreError::InUse { refs: 1 })
    ));
    // The pinned record still moves on (its state is refreshed) and stays pinned.
    let version = store.update_snapshot(&stored.value, stored.version).await?;
    let stored = store
        .get_snapshot(&org, &source.id, &snap.name)
        .await?
        .ok_or("snapshot")?;
    assert_eq!((stored.version, stored.refs), (version, 1));

    // Released (a restore clone's data recovered), then pinned again.
    let current = store
        .get_deployment(&org, &clone.id)
        .await?
        .ok_or("clone")?;
    let mut released = current.value.clone();
    if let Some(src) = released.clone_source.as_mut() {
        src.pinned = false;
    }
    store.replace_deployment(&released, &current, None).await?;
    let stored = store
        .get_snapshot(&org, &source.id, &snap.name)
        .await?
        .ok_or("snapshot")?;
    assert_eq!(stored.refs, 0);
    assert!(
        store
            .snapshot_pins(&org, &source.id, &snap.name)
            .await?
            .is_empty()
    );
    assert_eq!(
        refs("main").await?,
        2,
        "the clone still reads the repository"
    );
    let current = store
        .get_deployment(&org, &clone.id)
        .await?
        .ok_or("clone")?;
    store.replace_deployment(&clone, &current, None).await?;

    // Deleting the clone releases everything it held.
    let current = store
        .get_deployment(&org, &clone.id)
        .await?
        .ok_or("clone")?;
    assert_eq!(
        current.value.clone_source, clone.clone_source,
        "kept as written"
    );
    store.delete_deployment(&current).await?;
    assert_eq!(refs("main").await?, 1);
    assert!(
        store
            .snapshot_pins(&org, &source.id, &snap.name)
            .await?
            .is_empty()
    );
    let stored = store
        .get_snapshot(&org, &source.id, &snap.name)
        .await?
        .ok_or("snapshot")?;
    assert_eq!(stored.refs, 0);
    store.delete_snapshot(&stored).await?;
    Ok(())
}

/// A clone pins the snapshot as it read it: once a delete has marked the
/// record (a new version), a pin written with the version read before is
/// refused and writes nothing; one read after the mark is refused by the
/// caller, and one counted before the mark is seen by the delete's
/// re-read. So no snapshot is deleted under a clone that pinned it.
pub async fn a_pin_holds_only_the_snapshot_it_read(store: Store) -> TestResult {
    use floe_domain::restore::{CloneSource, RestoreMode};
    let org = org();
    store.create_repository(&repo(&org, "main")).await?;
    let (source, plan) = deployment(&org, "source", Some("main"), &[], &[]);
    store.create_deployment(&source, &plan, None).await?;
    let mut snap = snapshot(&org, &source.id, "nightly-1", 1_700_000_000, None);
    snap.state = SnapshotState::Success;
    store.create_snapshot(&snap).await?;
    let read = store
        .get_snapshot(&org, &source.id, &snap.name)
        .await?
        .ok_or("snapshot")?;
    let pin_at = |version: u64| CloneSource {
        source_deployment_id: source.id.clone(),
        repository: "main".into(),
        registered_as: "main".into(),
        snapshot: snap.name.clone(),
        snapshot_sort_millis: snap.sort_millis,
        mode: RestoreMode::Mount,
        pinned: true,
        snapshot_version: Some(version),
        license: None,
    };

    // A pin counted at the version read, before any delete began.
    let (mut early, plan) = deployment(&org, "early", None, &[], &[]);
    early.clone_source = Some(pin_at(read.version));
    store.create_deployment(&early, &plan, None).await?;
    let after_pin = store
        .get_snapshot(&org, &source.id, &snap.name)
        .await?
        .ok_or("snapshot")?;
    assert_eq!(
        (after_pin.version, after_pin.refs),
        (read.version, 1),
        "a pin counts without a new version"
    );

    // A delete begins: it marks the record, which takes a new version.
    let mut marked = after_pin.value.clone();
    marked.deleting = Some(chrono::Utc::now());
    let marked_at = store.update_snapshot(&marked, after_pin.version).await?;
    assert!(marked_at > read.version);

    // A clone that read the record before the mark may not pin it.
    let (mut late, plan) = deployment(&org, "late", None, &[], &[]);
    late.clone_source = Some(pin_at(read.version));
    match store.create_deployment(&late, &plan, None).await {
        Err(StoreError::MissingReference {
            kind: Kind::Snapshot,
            ..
        }) => {}
        other => {
            return Err(
                format!("a pin on a record read before its delete began: {other:?}").into(),
            );
        }
    }
    assert!(store.get_deployment(&org, &late.id).await?.is_none());
    assert!(
        store
            .snapshot_pins(&org, &source.id, &snap.name)
            .await?
            .iter()
            .all(|p| p.deployment_id != late.id),
        "the refused clone left no pin record"
    );
    let now = store
        .get_snapshot(&org, &source.id, &snap.name)
        .await?
        .ok_or("snapshot")?;
    assert_eq!(
        (now.version, now.refs),
        (marked_at, 1),
        "the delete's re-read sees the pin counted before its mark"
    );
    Ok(())
}

/// The fleet copies follow the deployment records, in every organization:
/// a running deployment is listed with its record's version, and goes with
/// its record.
pub async fn the_fleet_lists_running_deployments(store: Store) -> TestResult {
    let (a, b) = (org(), org());
    let (da, pa) = deployment(&a, "fleet-a", None, &[], &[]);
    let (db, pb) = deployment(&b, "fleet-b", None, &[], &[]);
    store.create_deployment(&da, &pa, None).await?;
    store.create_deployment(&db, &pb, None).await?;
    let listed = |page: &crate::Page<crate::Versioned<Deployment>>, id: &str| {
        page.items
            .iter()
            .find(|d| d.value.id == id)
            .map(|d| d.version)
    };
    // Every shard, every page.
    let all = |store: Store| async move {
        let mut items = Vec::new();
        for shard in 0..crate::FLEET_SHARDS {
            let mut page = PageRequest {
                size: Some(100),
                cursor: None,
            };
            loop {
                let got = store.list_fleet_shard(shard, &page).await?;
                for d in &got.items {
                    assert_eq!(
                        crate::fleet_shard(&d.value.org, &d.value.id),
                        shard,
                        "{} is listed in the wrong shard",
                        d.value.id
                    );
                }
                items.extend(got.items);
                match got.next_cursor {
                    Some(c) => page.cursor = Some(c),
                    None => break,
                }
            }
        }
        Ok::<_, StoreError>(crate::Page {
            items,
            next_cursor: None,
        })
    };
    // Initializing: not listed.
    assert_eq!(listed(&all(store.clone()).await?, &da.id), None);
    let previous = store.get_deployment(&a, &da.id).await?.ok_or("a")?;
    let mut running = previous.value.clone();
    running.status = DeploymentStatus::Running;
    let version = store.replace_deployment(&running, &previous, None).await?;
    let page = all(store.clone()).await?;
    assert_eq!(listed(&page, &da.id), Some(version));
    assert_eq!(listed(&page, &db.id), None);
    let stored = store.get_deployment(&a, &da.id).await?.ok_or("a")?;
    store.delete_deployment(&stored).await?;
    assert_eq!(listed(&all(store.clone()).await?, &da.id), None);
    Ok(())
}

/// What the health check writes is no change of the deployment: the
/// version (the ETag a user sends back in `If-Match`) stays, the record
/// and its fleet copy show the health, and a stale write is refused as
/// any other, never undoing a change that won.
pub async fn health_is_recorded_without_a_new_version(store: Store) -> TestResult {
    use floe_domain::health::Health;
    let a = org();
    let (d, p) = deployment(&a, "health", None, &[], &[]);
    store.create_deployment(&d, &p, None).await?;
    let created = store.get_deployment(&a, &d.id).await?.ok_or("d")?;
    let mut running = created.value.clone();
    running.status = DeploymentStatus::Running;
    let version = store.replace_deployment(&running, &created, None).await?;
    let read = store.get_deployment(&a, &d.id).await?.ok_or("d")?;
    assert_eq!(read.version, version);

    let health = Health {
        healthy: false,
        reason: Some("node group hot has 1 of 2 nodes running".into()),
        nodes: Vec::new(),
        warnings: Vec::new(),
        since: chrono::Utc::now(),
        heal_started: None,
        recovery_point: None,
        recovery_point_breached: None,
    };
    store.record_health(&read, &health).await?;
    let checked = store.get_deployment(&a, &d.id).await?.ok_or("d")?;
    assert_eq!(checked.version, version, "a health write moved the version");
    assert_eq!(checked.value.health.as_ref(), Some(&health));
    assert_eq!(checked.value.spec, read.value.spec);
    let fleet = store
        .list_fleet_shard(
            crate::fleet_shard(&a, &d.id),
            &PageRequest {
                size: Some(100),
                cursor: None,
            },
        )
        .await?;
    let copy = fleet
        .items
        .iter()
        .find(|x| x.value.id == d.id)
        .ok_or("fleet copy")?;
    assert_eq!(copy.version, version);
    assert_eq!(copy.value.health.as_ref(), Some(&health));

    // The user who read before the check still writes with that version.
    let mut renamed = read.value.clone();
    renamed.spec.name = "health-renamed".into();
    let after = store.replace_deployment(&renamed, &read, None).await?;
    assert_eq!(after, version + 1);
    // The check that read before the user's change is refused.
    let refused = store.record_health(&checked, &health).await;
    assert_eq!(refused, Err(StoreError::VersionMismatch { current: after }));
    let last = store.get_deployment(&a, &d.id).await?.ok_or("d")?;
    assert_eq!(last.value.spec.name, "health-renamed");
    Ok(())
}

/// A delete that keeps the deployment's snapshots leaves a former
/// deployment's record, listed by repository and counted on it in the
/// same batch; its plans can be removed a page at a time; forgetting it
/// releases the repository.
pub async fn a_deleted_deployments_kept_snapshots_hold_its_repository(store: Store) -> TestResult {
    let org = org();
    store.create_repository(&repo(&org, "kept")).await?;
    store.create_repository(&repo(&org, "other")).await?;
    let (d, plan) = deployment(&org, "doomed", Some("kept"), &[], &[]);
    store.create_deployment(&d, &plan, None).await?;
    store
        .create_snapshot(&snapshot(&org, &d.id, "final", 1_000, None))
        .await?;
    let previous = store.get_deployment(&org, &d.id).await?.ok_or("missing")?;
    let former = FormerDeployment {
        org: org.clone(),
        id: d.id.clone(),
        name: "doomed".into(),
        version: "8.15.3".into(),
        repository: "kept".into(),
        deleted: Utc::now(),
    };
    let mut finished = plan.clone();
    finished.status = floe_domain::plan::PlanStatus::Succeeded;
    store
        .finish_plan(
            &finished,
            1,
            crate::DeploymentOutcome::DeleteKeepingSnapshots {
                previous: &previous,
                former: &former,
            },
        )
        .await?;
    assert!(store.get_deployment(&org, &d.id).await?.is_none());
    let kept = store.get_repository(&org, "kept").await?.ok_or("missing")?;
    assert_eq!(kept.refs, 1, "the former deployment uses the repository");
    assert_eq!(
        store.delete_repository(&org, "kept", kept.version).await,
        Err(StoreError::InUse { refs: 1 })
    );
    let listed = store
        .list_former_deployments(&org, "kept", &PageRequest::default())
        .await?;
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].value, former);
    assert!(
        store
            .list_former_deployments(&org, "other", &PageRequest::default())
            .await?
            .items
            .is_empty()
    );
    assert!(
        store
            .list_former_deployments("another-org", "kept", &PageRequest::default())
            .await?
            .items
            .is_empty()
    );
    let got = store
        .get_former_deployment(&org, "kept", &d.id)
        .await?
        .ok_or("former missing")?;
    // The snapshot records stay under the deployment's id.
    assert_eq!(
        store
            .list_snapshots(&org, &d.id, None, &PageRequest::default())
            .await?
            .items
            .len(),
        1
    );

    // The deleted deployment's plans go, a page at a time.
    assert_eq!(store.delete_plans_of(&org, &d.id).await?, 1);
    assert!(
        store
            .list_plans(&org, &d.id, &PageRequest::default())
            .await?
            .items
            .is_empty()
    );
    assert_eq!(store.delete_plans_of(&org, &d.id).await?, 0);
    // And so do its policy run states.
    store
        .save_policy_run(&PolicyRun::new(&org, &d.id, "nightly", Utc::now()), None)
        .await?;
    assert_eq!(store.delete_policy_runs_of(&org, &d.id).await?, 1);
    assert!(
        store
            .get_policy_run(&org, &d.id, "nightly")
            .await?
            .is_none()
    );

    store.forget_former_deployment(&got).await?;
    let kept = store.get_repository(&org, "kept").await?.ok_or("missing")?;
    assert_eq!(kept.refs, 0);
    assert!(
        store
            .list_former_deployments(&org, "kept", &PageRequest::default())
            .await?
            .items
            .is_empty()
    );
    store.delete_repository(&org, "kept", kept.version).await?;
    Ok(())
}

/// A bucket's claim is written in the same batch as its repository: a
/// claim changed since it was read fails the write and nothing of it is
/// kept; a delete that the references refuse leaves the claim as it was.
pub async fn bucket_claims_go_with_their_repositories(store: Store) -> TestResult {
    use crate::ClaimChange;
    use floe_domain::bucket_claim::{BucketClaim, ClaimHolder};
    let holder = |org: &str, name: &str| ClaimHolder {
        org: org.into(),
        repository: name.into(),
        keyed: true,
        shared: false,
    };
    let empty = BucketClaim::new("minio.example:9000", "snaps");
    let acme = repo("acme", "main");
    store
        .create_repository_claimed(
            &acme,
            &[ClaimChange {
                before: None,
                after: empty.with(holder("acme", "main")),
            }],
        )
        .await?;
    let read = store
        .get_bucket_claim("minio.example:9000", "snaps")
        .await?
        .ok_or("the claim was not written")?;
    assert_eq!(read.value.holders, [holder("acme", "main")]);
    // Claims live outside every organization.
    assert!(store.get_repository("~system", "main").await?.is_none());

    // Two writers read the same claim; the second one's write fails whole.
    let first = ClaimChange {
        before: Some(read.clone()),
        after: read.value.with(holder("acme", "second")),
    };
    store
        .create_repository_claimed(&repo("acme", "second"), &[first])
        .await?;
    let stale = ClaimChange {
        before: Some(read.clone()),
        after: read.value.with(holder("globex", "theirs")),
    };
    let refused = store
        .create_repository_claimed(&repo("globex", "theirs"), &[stale])
        .await;
    assert!(
        matches!(refused, Err(StoreError::VersionMismatch { .. })),
        "{refused:?}"
    );
    assert!(store.get_repository("globex", "theirs").await?.is_none());

    // A delete refused for its references keeps the claim.
    let now = store
        .get_bucket_claim("minio.example:9000", "snaps")
        .await?
        .ok_or("claim")?;
    assert_eq!(now.value.holders.len(), 2);
    store.create_policy(&policy("acme", "main")).await?;
    let current = store.get_repository("acme", "main").await?.ok_or("repo")?;
    let leave = ClaimChange {
        before: Some(now.clone()),
        after: now.value.without("acme", "main"),
    };
    let in_use = store
        .delete_repository_claimed("acme", "main", current.version, &[leave])
        .await;
    assert!(
        matches!(in_use, Err(StoreError::InUse { .. })),
        "{in_use:?}"
    );
    assert_eq!(
        store
            .get_bucket_claim("minio.example:9000", "snaps")
            .await?
            .ok_or("claim")?,
        now
    );

    // The last holder gone, the claim is gone.
    let second = store
        .get_repository("acme", "second")
        .await?
        .ok_or("repo")?;
    let leave = ClaimChange {
        before: Some(now.clone()),
        after: now.value.without("acme", "second"),
    };
    store
        .delete_repository_claimed("acme", "second", second.version, &[leave])
        .await?;
    let left = store
        .get_bucket_claim("minio.example:9000", "snaps")
        .await?
        .ok_or("claim")?;
    assert_eq!(left.value.holders, [holder("acme", "main")]);
    let claim_emptied = ClaimChange {
        before: Some(left.clone()),
        after: left.value.without("acme", "main"),
    };
    assert!(claim_emptied.after.is_empty());
    Ok(())
}

/// A platform license is one record per organization: created once,
/// replaced on the version read, deleted, and never seen by another.
pub async fn platform_licenses_round_trip(store: Store) -> TestResult {
    use floe_domain::license::{LicenseDocument, PlatformLicense};
    let now = chrono::Utc::now();
    let license = |org: &str, uid: &str| PlatformLicense {
        org: org.into(),
        license: LicenseDocument {
            uid: uid.into(),
            license_type: "enterprise".into(),
            issuer: "elasticsearch".into(),
            issued_to: "Example Corp".into(),
            issue_date_in_millis: now.timestamp_millis(),
            start_date_in_millis: now.timestamp_millis(),
            expiry_date_in_millis: now.timestamp_millis() + 86_400_000,
            signature: "c2lnbmF0dXJl".into(),
            max_nodes: None,
            max_resource_units: Some(4),
            max_instances: None,
            version: Some(5),
            subscription_type: None,
        },
        uploaded: now,
        uploaded_by: "admin".into(),
    };
    assert_eq!(store.get_platform_license("acme").await?, None);
    assert_eq!(
        store
            .put_platform_license(&license("acme", "u1"), None)
            .await?,
        1
    );
    assert_eq!(
        store
            .put_platform_license(&license("acme", "u0"), None)
            .await,
        Err(StoreError::AlreadyExists)
    );
    let first = store.get_platform_license("acme").await?.ok_or("stored")?;
    assert_eq!(first.value, license("acme", "u1"));
    assert_eq!(store.get_platform_license("globex").await?, None);
    assert_eq!(
        store
            .put_platform_license(&license("acme", "u2"), Some(&first))
            .await?,
        2
    );
    assert_eq!(
        store
            .put_platform_license(&license("acme", "u3"), Some(&first))
            .await,
        Err(StoreError::VersionMismatch { current: 2 })
    );
    assert_eq!(
        store.delete_platform_license(&first).await,
        Err(StoreError::VersionMismatch { current: 2 })
    );
    let second = store.get_platform_license("acme").await?.ok_or("stored")?;
    assert_eq!(second.value.license.uid, "u2");
    store.delete_platform_license(&second).await?;
    assert_eq!(store.get_platform_license("acme").await?, None);
    Ok(())
}

/// API keys are records of their organization: created once by id, listed
/// oldest first a page at a time, their last use written on the version
/// read, deleted; the organization's hashing key is made once.
pub async fn api_keys_round_trip(store: Store) -> TestResult {
    use floe_domain::api_key::{ApiKey, KeyHashingKey};
    let now = chrono::Utc::now();
    let key = |org: &str, n: u32| ApiKey {
        id: format!("0190000000000000000000000000{n:04}"),
        org: org.into(),
        issuer: "floe-local".into(),
        subject: "ops".into(),
        description: format!("key {n}"),
        roles: vec!["deployment_manager".into()],
        created: now,
        expiration: None,
        last_used: None,
        mac: format!("mac-{n}"),
    };
    for n in 0..3 {
        store.create_api_key(&key("acme", n)).await?;
    }
    assert_eq!(
        store.create_api_key(&key("acme", 1)).await,
        Err(StoreError::AlreadyExists)
    );
    let first = store
        .list_api_keys(
            "acme",
            &PageRequest {
                size: Some(2),
                cursor: None,
            },
        )
        .await?;
    assert_eq!(
        first
            .items
            .iter()
            .map(|k| k.value.id.clone())
            .collect::<Vec<_>>(),
        [key("acme", 0).id, key("acme", 1).id]
    );
    let rest = store
        .list_api_keys(
            "acme",
            &PageRequest {
                size: Some(2),
                cursor: first.next_cursor.clone(),
            },
        )
        .await?;
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.next_cursor, None);
    assert!(
        store
            .list_api_keys("globex", &PageRequest::default())
            .await?
            .items
            .is_empty()
    );
    assert_eq!(store.get_api_key("globex", &key("acme", 0).id).await?, None);

    let read = store
        .get_api_key("acme", &key("acme", 0).id)
        .await?
        .ok_or("stored")?;
    let mut used = read.value.clone();
    used.last_used = Some(now);
    assert_eq!(store.update_api_key(&used, &read).await?, 2);
    assert_eq!(
        store.update_api_key(&used, &read).await,
        Err(StoreError::VersionMismatch { current: 2 })
    );
    assert_eq!(
        store.delete_api_key(&read).await,
        Err(StoreError::VersionMismatch { current: 2 })
    );
    let current = store.get_api_key("acme", &used.id).await?.ok_or("stored")?;
    assert_eq!(current.value, used);
    store.delete_api_key(&current).await?;
    assert_eq!(store.get_api_key("acme", &used.id).await?, None);

    let hashing = |org: &str, sealed: &str| KeyHashingKey {
        org: org.into(),
        sealed: sealed.into(),
        created: now,
    };
    assert_eq!(store.get_key_hashing_key("acme").await?, None);
    store
        .create_key_hashing_key(&hashing("acme", "first"))
        .await?;
    assert_eq!(
        store
            .create_key_hashing_key(&hashing("acme", "second"))
            .await,
        Err(StoreError::AlreadyExists)
    );
    assert_eq!(
        store.get_key_hashing_key("acme").await?,
        Some(hashing("acme", "first"))
    );
    assert_eq!(store.get_key_hashing_key("globex").await?, None);
    Ok(())
}

/// One `#[tokio::test]` per conformance scenario, each on the store that
/// `$make` (an async fn returning `Result<(Store, keep), Box<dyn Error>>`)
/// builds. The calling crate needs `tokio` with `macros` and `rt-multi-thread`.
#[macro_export]
macro_rules! conformance_suite {
    ($make:path) => {
        $crate::conformance_suite!(@tests $make; repositories_round_trip, organizations_are_isolated, references_guard_deletes, dangling_references_write_nothing, deployments_move_references_and_keep_plans, lists_page_and_filter, idempotency_keys, concurrent_updates_one_wins, snapshots_newest_first_by_name_and_paged, policy_runs_round_trip, active_plans_are_listed, clone_pins_guard_snapshots, a_pin_holds_only_the_snapshot_it_read, the_fleet_lists_running_deployments, health_is_recorded_without_a_new_version, a_deleted_deployments_kept_snapshots_hold_its_repository, bucket_claims_go_with_their_repositories, platform_licenses_round_trip, api_keys_round_trip);
    };
    (@tests $make:path; $($test:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() -> $crate::conformance::TestResult {
                let (store, _keep) = $make().await?;
                $crate::conformance::$test(store).await
            }
        )*
    };
}
