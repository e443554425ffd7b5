use super::*;
use crate::plan::{PlanParams, StepError, StepRecord};

fn plan_of(indices: &[&str], counts: Option<&[(&str, u64, Option<u64>)]>) -> DrillPlan {
    DrillPlan {
        drill_id: "d1".into(),
        drill_key: "src#1#d1".into(),
        source_deployment_id: "src".into(),
        indices: indices.iter().map(|i| i.to_string()).collect(),
        document_counts: counts.map(|c| {
            c.iter()
                .map(|(i, before, after)| {
                    (
                        i.to_string(),
                        DocumentCount {
                            before: *before,
                            after: *after,
                        },
                    )
                })
                .collect()
        }),
        queries: Vec::new(),
    }
}

fn index(name: &str, health: &str, documents: u64) -> RestoredIndex {
    RestoredIndex {
        name: name.into(),
        health: health.into(),
        documents,
    }
}

#[test]
fn a_restore_that_holds_every_document_passes_every_check() {
    let plan = plan_of(&["a", "b"], Some(&[("a", 10, Some(10)), ("b", 5, Some(8))]));
    let checks = judge(
        &plan,
        &[index("a", "green", 10), index("b", "green", 7)],
        &[],
    );
    assert_eq!(checks.len(), 4);
    assert!(
        checks.iter().all(|c| c.outcome == CheckOutcome::Passed),
        "{checks:?}"
    );
    assert_eq!(failed_reason(&checks), None);
}

#[test]
fn a_count_outside_the_recorded_range_fails_naming_the_index() {
    let plan = plan_of(&["a", "b"], Some(&[("a", 10, Some(10)), ("b", 5, Some(5))]));
    let checks = judge(
        &plan,
        &[index("a", "green", 10), index("b", "green", 4)],
        &[],
    );
    let reason = failed_reason(&checks).expect("a failure");
    assert!(
        reason.contains("document_count") && reason.contains("index b"),
        "{reason}"
    );
    assert!(reason.contains("4 documents"), "{reason}");
}

#[test]
fn a_missing_or_yellow_index_fails_and_snapshots_without_counts_skip_the_count() {
    let plan = plan_of(&["a", "b"], None);
    let checks = judge(&plan, &[index("a", "yellow", 3)], &[]);
    let outcomes: Vec<(&str, CheckOutcome)> = checks
        .iter()
        .map(|c| (c.check.as_str(), c.outcome))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            ("green", CheckOutcome::Failed),
            ("document_count", CheckOutcome::Skipped),
            ("restored", CheckOutcome::Failed),
        ]
    );
    assert!(
        checks[1].detail.contains("did not take"),
        "{}",
        checks[1].detail
    );
    let reason = failed_reason(&checks).expect("failed");
    assert!(reason.contains("1 more"), "{reason}");
}

#[test]
fn a_query_with_too_few_hits_fails() {
    let plan = plan_of(&[], None);
    let answers = [
        QueryAnswer {
            index: "a".into(),
            min_hits: 3,
            hits: Ok(2),
        },
        QueryAnswer {
            index: "b".into(),
            min_hits: 0,
            hits: Ok(0),
        },
        QueryAnswer {
            index: "c".into(),
            min_hits: 1,
            hits: Err("index_not_found_exception".into()),
        },
    ];
    let checks = judge(&plan, &[], &answers);
    let outcomes: Vec<CheckOutcome> = checks.iter().map(|c| c.outcome).collect();
    assert_eq!(
        outcomes,
        vec![
            CheckOutcome::Failed,
            CheckOutcome::Passed,
            CheckOutcome::Failed
        ]
    );
    assert_eq!(checks[0].detail, "2 hits, at least 3 wanted");
}

#[test]
fn requests_are_checked_field_by_field() {
    let ok = DrillRequest {
        queries: vec![DrillQuery {
            index: "logs-*".into(),
            query: Some(serde_json::json!({"match_all": {}})),
            min_hits: 1,
        }],
        ..DrillRequest::default()
    };
    assert!(ok.validate().is_ok());
    let mut bad = ok.clone();
    bad.queries[0].index = "Logs".into();
    let e = bad.validate().expect_err("upper case");
    assert_eq!(e.0[0].field, "queries[0].index");
    let mut bad = ok.clone();
    bad.queries[0].query = Some(serde_json::json!([1]));
    assert_eq!(
        bad.validate().expect_err("array").0[0].field,
        "queries[0].query"
    );
    let mut bad = ok.clone();
    bad.license = Some(CloneLicense::Trial);
    assert_eq!(bad.validate().expect_err("restore").0[0].field, "license");
    let mut bad = ok;
    bad.queries = vec![bad.queries[0].clone(); MAX_QUERIES + 1];
    assert_eq!(bad.validate().expect_err("many").0[0].field, "queries");
}

#[test]
fn the_clone_is_one_node_of_the_smallest_size_of_the_source_family() {
    let source: DeploymentSpec = serde_json::from_value(serde_json::json!({
        "name": "logs", "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.4xlarge",
                         "count": 3, "zone_count": 3, "storage": {"size_gb": 500}}]
    }))
    .expect("spec");
    let groups = clone_groups(&source, None, 40_000_000_000);
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].count, 1);
    let family = crate::catalog::lookup(&groups[0].instance_type)
        .expect("known")
        .family;
    assert_eq!(family, "m6g");
    assert!(
        crate::catalog::all()
            .iter()
            .filter(|t| t.family == "m6g")
            .all(|t| t.memory_mib
                >= crate::catalog::lookup(&groups[0].instance_type).map_or(0, |s| s.memory_mib))
    );
    assert_eq!(groups[0].storage.size_gb, 60);
    assert_eq!(
        clone_groups(&source, None, 1)
            .first()
            .map(|g| g.storage.size_gb),
        Some(10)
    );
    assert_eq!(
        clone_groups(&source, Some("c6g.large"), 1)
            .first()
            .map(|g| g.instance_type.clone()),
        Some("c6g.large".to_string())
    );
    assert_eq!(clone_name("logs"), "drill-logs");
    assert_eq!(clone_name(&"a".repeat(63)).len(), 63);
}

fn drill_view(started: DateTime<Utc>) -> DrillView {
    DrillView {
        id: "d1".into(),
        deployment_id: "src".into(),
        status: DrillStatus::Running,
        mode: RestoreMode::Restore,
        snapshot: "s1".into(),
        repository: "r".into(),
        clone_deployment_id: "c1".into(),
        plan_id: "p1".into(),
        started,
        finished: None,
        recovery_point_seconds: 60,
        recovery_time: None,
        bytes_recovered: None,
        bytes_per_second: None,
        checks: Vec::new(),
        failure: None,
    }
}

fn step(id: &str, status: StepStatus, started: DateTime<Utc>, millis: u64) -> StepRecord {
    StepRecord {
        status,
        started: Some(started),
        duration_in_millis: Some(millis),
        ..StepRecord::new(id)
    }
}

#[test]
fn a_finished_plan_gives_the_measures_and_the_verdict() {
    let t0 = "2026-12-05T10:00:00Z"
        .parse::<DateTime<Utc>>()
        .expect("time");
    let spec: DeploymentSpec = serde_json::from_value(serde_json::json!({
        "name": "drill-logs", "version": "8.15.3",
        "node_groups": [{"id": "drill", "roles": ["master", "data_hot"], "instance_type": "m6g.large",
                         "count": 1, "storage": {"size_gb": 10}}]
    }))
    .expect("spec");
    let params = PlanParams::Drill(Box::new(DrillParams {
        spec,
        drill: plan_of(&["a"], None),
    }));
    let mut plan = Plan::new("acme", "c1", params, "deployments.drill", "alice", t0);
    let s = chrono::Duration::seconds;
    let mut restored = step("wait-restored", StepStatus::Succeeded, t0 + s(30), 10_000);
    restored.output = serde_json::json!({"bytes_recovered": 50_000});
    let mut check = step(CHECK_STEP, StepStatus::Succeeded, t0 + s(40), 5);
    check.output = serde_json::json!({"checks": [
        {"check": "green", "index": "a", "outcome": "passed", "detail": "health green"}]});
    plan.steps = vec![
        step("launch:drill", StepStatus::Succeeded, t0, 1000),
        step("restore", StepStatus::Succeeded, t0 + s(20), 100),
        restored,
        check,
    ];
    let drill = drill_view(t0);
    assert_eq!(
        settle(&drill, &plan),
        drill,
        "a running plan leaves it running"
    );
    plan.status = PlanStatus::Succeeded;
    plan.finished = Some(t0 + s(60));
    let done = settle(&drill, &plan);
    assert_eq!(done.status, DrillStatus::Passed);
    assert_eq!(
        done.recovery_time,
        Some(RecoveryTime {
            total_millis: 40_000,
            provisioning_millis: 20_000,
            recovery_millis: 20_000
        })
    );
    assert_eq!(done.bytes_recovered, Some(50_000));
    assert_eq!(done.bytes_per_second, Some(2_500));
    assert_eq!(done.checks.len(), 1);

    plan.status = PlanStatus::Failed;
    let mut verdict = step(VERDICT_STEP, StepStatus::Failed, t0 + s(41), 1);
    verdict.error = Some(StepError {
        failure_type: "drill_check_failed".into(),
        message: "green check failed on index a".into(),
    });
    plan.error = verdict.error.clone();
    plan.steps.push(verdict);
    let failed = settle(&drill, &plan);
    assert_eq!(failed.status, DrillStatus::Failed);
    let failure = failed.failure.expect("a failure");
    assert_eq!(failure.step, VERDICT_STEP);
    assert_eq!(failure.failure_type, "drill_check_failed");
}

#[test]
fn recovery_is_judged_against_the_targets_and_never_without_a_drill_or_targets() {
    let t0 = "2026-12-05T10:00:00Z"
        .parse::<DateTime<Utc>>()
        .expect("time");
    let last = LastDrill {
        id: "d1".into(),
        status: DrillStatus::Passed,
        snapshot: "s1".into(),
        started: t0,
        finished: Some(t0),
        recovery_point_seconds: 7200,
        recovery_time_millis: Some(90_000),
        failure: None,
    };
    assert_eq!(RecoveryView::of(None, None, None), None);
    let met = RecoveryView::of(None, Some(&last), None).expect("a view");
    assert!(met.healthy && met.reasons.is_empty());
    let targets = RecoveryTargets {
        recovery_point: Some("1h".into()),
        recovery_time: Some("1m".into()),
    };
    let missed = RecoveryView::of(Some(&targets), Some(&last), None).expect("a view");
    assert!(!missed.healthy);
    assert_eq!(missed.reasons.len(), 2, "{:?}", missed.reasons);
    assert!(missed.reasons[0].contains("90000 ms") && missed.reasons[0].contains("1m"));
    assert!(missed.reasons[1].contains("7200 s old") && missed.reasons[1].contains("1h"));
    let failed = LastDrill {
        status: DrillStatus::Failed,
        failure: Some("wait-restored: index a is red".into()),
        ..last.clone()
    };
    let view = RecoveryView::of(None, Some(&failed), None).expect("a view");
    assert_eq!(
        view.reasons,
        vec!["the last drill failed at wait-restored: index a is red".to_string()]
    );
    let unproven = RecoveryView::of(Some(&targets), None, None).expect("a view");
    assert!(!unproven.healthy);

    // The health check's recovery point: shown whenever found; a breach it
    // found is a reason of its own.
    let point = crate::health::RecoveryPoint {
        snapshot: "s9".into(),
        end: t0,
    };
    let mut health = crate::health::Health {
        healthy: true,
        reason: None,
        nodes: Vec::new(),
        warnings: Vec::new(),
        since: t0,
        heal_started: None,
        recovery_point: Some(point.clone()),
        recovery_point_breached: None,
    };
    let shown = RecoveryView::of(None, None, Some(&health)).expect("a view");
    assert!(shown.healthy && shown.last_drill.is_none());
    assert_eq!(shown.recovery_point, Some(point.clone()));
    health.recovery_point_breached = Some(t0 + chrono::Duration::hours(2));
    let breached = RecoveryView::of(Some(&targets), Some(&last), Some(&health)).expect("a view");
    assert!(!breached.healthy);
    assert!(
        breached.reasons[0].starts_with("the newest successful snapshot (s9) ended at ")
            && breached.reasons[0].contains("recovery point target of 1h"),
        "{:?}",
        breached.reasons
    );
    assert!(point.older_than(
        std::time::Duration::from_secs(3600),
        t0 + chrono::Duration::minutes(61)
    ));
    assert!(!point.older_than(
        std::time::Duration::from_secs(3600),
        t0 + chrono::Duration::minutes(59)
    ));
}
