//! One conformance suite, run unchanged against every storage adapter:
//! SQLite (a temporary file) and DynamoDB (moto on 127.0.0.1, through the
//! real `aws-sdk-dynamodb` client; started by scripts/test.sh).

use chrono::Utc;
use floe_domain::deployment::{
    Deployment, DeploymentSpec, DeploymentStatus, Metadata, NodeGroup, NodeRole,
    SnapshotAttachment, Storage, Tag, VolumeType,
};
use floe_domain::names::new_resource_id;
use floe_domain::plan::{Plan, PlanKind};
use floe_domain::policy::{Policy, PolicySpec, Schedule, ScheduleExpression};
use floe_domain::repository::{FsSettings, Repository, RepositorySettings};
use floe_store::backend::Backend;
use floe_store::{Filter, Idempotency, Kind, PageRequest, Store, StoreError};
use std::collections::BTreeMap;
use std::sync::Arc;

type TestResult = Result<(), Box<dyn std::error::Error>>;

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
    };
    let params = serde_json::to_value(&spec).unwrap_or_default();
    let p = Plan::new(
        org,
        &id,
        PlanKind::Create,
        params,
        "deployments.create",
        "tester",
        now,
    );
    let d = Deployment {
        id: id.clone(),
        org: org.into(),
        spec,
        status: DeploymentStatus::Initializing,
        pending_plan: Some(p.reference()),
        created: now,
        updated: now,
    };
    (d, p)
}

/// A fresh organization per test keeps tests independent on a shared table.
fn org() -> String {
    format!("org-{}", &new_resource_id()[20..])
}

async fn repositories_round_trip(store: Store) -> TestResult {
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

async fn organizations_are_isolated(store: Store) -> TestResult {
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

async fn references_guard_deletes(store: Store) -> TestResult {
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

async fn dangling_references_write_nothing(store: Store) -> TestResult {
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

async fn deployments_move_references_and_keep_plans(store: Store) -> TestResult {
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
        kind: PlanKind::Update,
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

async fn lists_page_and_filter(store: Store) -> TestResult {
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

async fn idempotency_keys(store: Store) -> TestResult {
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

async fn concurrent_updates_one_wins(store: Store) -> TestResult {
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

macro_rules! conformance {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() -> super::TestResult {
                    let dir = tempfile::tempdir()?;
                    super::$test(super::sqlite_store(&dir)?).await
                }
            )*
        }
        mod dynamodb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() -> super::TestResult {
                    super::$test(super::dynamo_store().await?).await
                }
            )*
        }
    };
}

conformance!(
    repositories_round_trip,
    organizations_are_isolated,
    references_guard_deletes,
    dangling_references_write_nothing,
    deployments_move_references_and_keep_plans,
    lists_page_and_filter,
    idempotency_keys,
    concurrent_updates_one_wins,
);

fn sqlite_store(dir: &tempfile::TempDir) -> Result<Store, Box<dyn std::error::Error>> {
    let backend: Arc<dyn Backend> = Arc::new(floe_store::sqlite::SqliteBackend::open(
        &dir.path().join("floe.db"),
    )?);
    Ok(Store::new(backend))
}

async fn dynamo_store() -> Result<Store, Box<dyn std::error::Error>> {
    let endpoint = std::env::var("FLOE_TEST_AWS_ENDPOINT").map_err(|_| {
        "FLOE_TEST_AWS_ENDPOINT is not set: run scripts/test.sh, which starts moto on 127.0.0.1 and sets it"
    })?;
    let config = aws_sdk_dynamodb::config::Builder::new()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "test",
            "test",
            None,
            None,
            "floe-tests",
        ))
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    let table = format!("floe-conformance-{}", new_resource_id());
    let backend = floe_store::dynamo::DynamoBackend::new(client, table);
    backend.ensure_table().await?;
    let backend: Arc<dyn Backend> = Arc::new(backend);
    Ok(Store::new(backend))
}
