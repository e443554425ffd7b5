//! Licensing, against Elasticsearch 8's documented answers: a new cluster
//! runs `basic`; one trial per cluster, kept across restarts; installed
//! licenses reported `valid`, `expired` or `invalid`, downgrades waiting for
//! an acknowledgement; searchable snapshots refused unless an active
//! `enterprise` or trial license is in force.

use crate::common::{
    Fallible, TestResult, call, client, eventually, fs_repo, seed, start, start_trial,
};
use floe_elastic::CreateSnapshot;
use floe_elastic_sim::{RunningCluster, SimConfig, SimFaults, SimulatedCluster};
use reqwest::Method;
use serde_json::{Value, json};
use std::path::Path;

const DAY: i64 = 24 * 3600 * 1000;

fn now() -> Fallible<i64> {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    Ok(i64::try_from(since.as_millis())?)
}

/// A license document as Elastic issues one (the simulator takes its
/// signature as sent).
fn license(license_type: &str, issued: i64, expires: i64) -> Value {
    let mut license = json!({
        "uid": "893361dc-9749-4997-93cb-802e3d7fa4a8",
        "type": license_type,
        "issue_date_in_millis": issued,
        "expiry_date_in_millis": expires,
        "max_nodes": 100,
        "issued_to": "Floe tests",
        "issuer": "API",
        "signature": "AAAABQAAAA0FakeSignatureForTests",
        "start_date_in_millis": -1,
    });
    if license_type == "enterprise" {
        license["max_nodes"] = Value::Null;
        license["max_resource_units"] = json!(10);
    }
    json!({ "license": license })
}

/// The error Elasticsearch answers when the license does not cover a
/// feature.
fn non_compliant(feature: &str) -> Value {
    let cause = json!({
        "type": "security_exception",
        "reason": format!("current license is non-compliant for [{feature}]"),
        "license.expired.feature": feature,
    });
    let mut error = cause.clone();
    error["root_cause"] = json!([cause]);
    json!({ "error": error, "status": 403 })
}

/// What `PUT _license` answers for a license it took (`valid`) or
/// reported without installing it (`expired`, `invalid`).
fn installed(license_status: &str) -> (u16, Value) {
    (
        200,
        json!({"acknowledged": true, "license_status": license_status}),
    )
}

/// `POST path` without a body.
async fn post(cluster: &RunningCluster, path: &str) -> Fallible<(u16, Value)> {
    call(cluster, Method::POST, path, None).await
}

/// `method /_license` with `body`.
async fn install(cluster: &RunningCluster, method: Method, body: Value) -> Fallible<(u16, Value)> {
    call(cluster, method, "/_license", Some(body)).await
}

async fn get_license(cluster: &RunningCluster) -> Fallible<Value> {
    let (status, body) = call(cluster, Method::GET, "/_license", None).await?;
    assert_eq!(status, 200, "{body}");
    Ok(body["license"].clone())
}

async fn eligible(cluster: &RunningCluster, which: &str) -> Fallible<Value> {
    let path = format!("/_license/{which}_status");
    let (status, body) = call(cluster, Method::GET, &path, None).await?;
    assert_eq!(status, 200, "{body}");
    Ok(body[format!("eligible_to_start_{which}")].clone())
}

/// A cluster with a snapshot of `events` in repository `repo` to mount.
async fn with_snapshot(name: &str, root: &Path) -> Fallible<RunningCluster> {
    let cluster = start(name, root, SimFaults::default()).await?;
    seed(&cluster, "events", 3).await?;
    let es = client(&cluster)?;
    es.put_repository("repo", &fs_repo("repo")).await?;
    es.create_snapshot("repo", "s", &CreateSnapshot::default(), true)
        .await?;
    Ok(cluster)
}

async fn mount(cluster: &RunningCluster, renamed: &str) -> Fallible<(u16, Value)> {
    call(
        cluster,
        Method::POST,
        "/_snapshot/repo/s/_mount?wait_for_completion=true",
        Some(json!({ "index": "events", "renamed_index": renamed })),
    )
    .await
}

#[tokio::test]
async fn a_new_cluster_runs_basic_and_may_start_one_trial() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = start("licensed", root.path(), SimFaults::default()).await?;

    let basic = get_license(&cluster).await?;
    let mut keys: Vec<&str> = basic
        .as_object()
        .ok_or("no license")?
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    // A basic license that never expires shows no expiry.
    assert_eq!(
        keys,
        [
            "issue_date",
            "issue_date_in_millis",
            "issued_to",
            "issuer",
            "max_nodes",
            "max_resource_units",
            "start_date_in_millis",
            "status",
            "type",
            "uid"
        ]
    );
    assert_eq!(basic["status"], "active");
    assert_eq!(basic["type"], "basic");
    assert_eq!(basic["issued_to"], "licensed");
    assert_eq!(basic["issuer"], "elasticsearch");
    assert_eq!(basic["max_nodes"], 1000);
    assert_eq!(basic["max_resource_units"], Value::Null);
    assert_eq!(basic["start_date_in_millis"], -1);
    assert_eq!(eligible(&cluster, "trial").await?, json!(true));
    assert_eq!(eligible(&cluster, "basic").await?, json!(false));

    // Without acknowledge=true, the terms to acknowledge.
    let (status, body) = call(&cluster, Method::POST, "/_license/start_trial", None).await?;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({
            "acknowledged": false,
            "trial_was_started": false,
            "error_message": "Operation failed: Needs acknowledgement.",
            "acknowledge": {
                "message": "This API initiates a free 30-day trial for all subscription features. By starting this trial, you agree that it is subject to the terms and conditions at https://www.elastic.co/legal/trial_license/. To begin your free trial, call /start_trial again and specify the \"acknowledge=true\" parameter.",
                "security": ["With a trial license, X-Pack security features are available, but are not enabled by default."]
            }
        })
    );
    assert_eq!(get_license(&cluster).await?["type"], "basic");

    for (path, reason) in [
        (
            "/_license/start_trial?acknowledge=true&type=basic",
            "Cannot start trial of type [basic]. Valid trial types are [enterprise,gold,platinum,trial]",
        ),
        (
            "/_license/start_trial?acknowledge=true&type=diamond",
            "unrecognised license type [ diamond], supported license types are [basic,standard,gold,platinum,enterprise,trial]",
        ),
        (
            "/_license/start_trial?acknowledge=true&days=60",
            "request [/_license/start_trial] contains unrecognized parameter: [days] (Floe's simulated Elasticsearch does not support them)",
        ),
    ] {
        let (status, body) = call(&cluster, Method::POST, path, None).await?;
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(body["error"]["type"], "illegal_argument_exception");
        assert_eq!(body["error"]["reason"], reason);
    }

    let (status, body) = post(&cluster, "/_license/start_trial?acknowledge=true").await?;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"acknowledged": true, "trial_was_started": true, "type": "trial"})
    );
    let trial = get_license(&cluster).await?;
    assert_eq!(trial["type"], "trial");
    assert_eq!(trial["status"], "active");
    assert_eq!(trial["max_nodes"], 1000);
    let length = trial["expiry_date_in_millis"].as_i64().ok_or("no expiry")?
        - trial["issue_date_in_millis"]
            .as_i64()
            .ok_or("no issue date")?;
    assert_eq!(length, 30 * DAY);
    assert!(trial["expiry_date"].is_string(), "{trial}");
    assert_eq!(eligible(&cluster, "trial").await?, json!(false));
    assert_eq!(eligible(&cluster, "basic").await?, json!(true));

    // One trial per cluster.
    let refused = json!({
        "acknowledged": true,
        "trial_was_started": false,
        "error_message": "Operation failed: Trial was already activated."
    });
    let (status, body) = post(&cluster, "/_license/start_trial?acknowledge=true").await?;
    assert_eq!((status, &body), (403, &refused));

    // Back to basic: the features a trial had ask to be acknowledged.
    let (status, body) = call(&cluster, Method::POST, "/_license/start_basic", None).await?;
    assert_eq!(status, 200);
    assert_eq!(body["acknowledged"], false);
    assert_eq!(body["basic_was_started"], false);
    assert_eq!(
        body["error_message"],
        "Operation failed: Needs acknowledgement."
    );
    assert_eq!(
        body["acknowledge"]["message"],
        "This license update requires acknowledgement. To acknowledge the license, please read the following messages and call /start_basic again, this time with the \"acknowledge=true\" parameter:"
    );
    assert_eq!(
        body["acknowledge"]["watcher"],
        json!(["Watcher will be disabled"])
    );
    assert_eq!(
        body["acknowledge"]["ccr"],
        json!(["Cross-Cluster Replication will be disabled"])
    );
    assert_eq!(get_license(&cluster).await?["type"], "trial");
    let (status, body) = post(&cluster, "/_license/start_basic?acknowledge=true").await?;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"acknowledged": true, "basic_was_started": true})
        )
    );
    assert_eq!(get_license(&cluster).await?["type"], "basic");
    let (status, body) = post(&cluster, "/_license/start_basic?acknowledge=true").await?;
    assert_eq!(
        (status, body),
        (
            403,
            json!({
                "acknowledged": true,
                "basic_was_started": false,
                "error_message": "Operation failed: Current license is basic."
            })
        )
    );
    // Going back to basic does not give the trial back.
    assert_eq!(eligible(&cluster, "trial").await?, json!(false));
    let (status, body) = post(&cluster, "/_license/start_trial?acknowledge=true").await?;
    assert_eq!((status, body), (403, refused));

    let (status, body) = call(&cluster, Method::GET, "/_license/start_trial", None).await?;
    assert_eq!(status, 405, "{body}");
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn mounting_needs_an_enterprise_license_or_a_trial() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = with_snapshot("mounting", root.path()).await?;

    let (status, body) = mount(&cluster, "on-basic").await?;
    assert_eq!((status, body), (403, non_compliant("searchable-snapshots")));
    // The request is read before the license is checked.
    let (status, body) = call(
        &cluster,
        Method::POST,
        "/_snapshot/repo/s/_mount",
        Some(json!({})),
    )
    .await?;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "x_content_parse_exception");
    let (status, _) = call(&cluster, Method::GET, "/on-basic", None).await?;
    assert_eq!(status, 404);

    start_trial(&cluster).await?;
    let (status, body) = mount(&cluster, "on-trial").await?;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(&cluster, Method::GET, "/on-trial/_count", None).await?;
    assert_eq!((status, &body["count"]), (200, &json!(3)), "{body}");
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn installed_licenses_are_checked_and_only_enterprise_mounts() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = with_snapshot("installing", root.path()).await?;
    let now = now()?;

    // An expired license is reported, not installed.
    let sent = license("enterprise", now - 60 * DAY, now - DAY);
    assert_eq!(
        install(&cluster, Method::PUT, sent).await?,
        installed("expired")
    );
    assert_eq!(get_license(&cluster).await?["type"], "basic");
    let (status, body) = mount(&cluster, "refused").await?;
    assert_eq!((status, body), (403, non_compliant("searchable-snapshots")));

    // Nor is one issued in the future.
    let sent = license("enterprise", now + DAY, now + 365 * DAY);
    assert_eq!(
        install(&cluster, Method::PUT, sent).await?,
        installed("invalid")
    );

    // Platinum does not include searchable snapshots in 8.x.
    let sent = license("platinum", now - DAY, now + 365 * DAY);
    assert_eq!(
        install(&cluster, Method::PUT, sent).await?,
        installed("valid")
    );
    assert_eq!(get_license(&cluster).await?["type"], "platinum");
    let (status, body) = mount(&cluster, "on-platinum").await?;
    assert_eq!((status, body), (403, non_compliant("searchable-snapshots")));

    let sent = license("enterprise", now - DAY, now + 365 * DAY);
    assert_eq!(
        install(&cluster, Method::POST, sent).await?,
        installed("valid")
    );
    let enterprise = get_license(&cluster).await?;
    assert_eq!(enterprise["status"], "active");
    assert_eq!(enterprise["type"], "enterprise");
    assert_eq!(enterprise["max_nodes"], Value::Null);
    assert_eq!(enterprise["max_resource_units"], 10);
    assert_eq!(enterprise["issued_to"], "Floe tests");
    assert_eq!(enterprise["issuer"], "API");
    assert!(enterprise.get("signature").is_none(), "{enterprise}");
    let (status, body) = mount(&cluster, "on-enterprise").await?;
    assert_eq!(status, 200, "{body}");

    // A downgrade waits for acknowledge=true.
    let gold = license("gold", now - DAY, now + 365 * DAY);
    let (status, body) = call(&cluster, Method::PUT, "/_license", Some(gold.clone())).await?;
    assert_eq!(status, 200);
    assert_eq!(body["acknowledged"], false);
    assert_eq!(body["license_status"], "valid");
    assert_eq!(
        body["acknowledge"]["message"],
        "This license update requires acknowledgement. To acknowledge the license, please read the following messages and update the license again, this time with the \"acknowledge=true\" parameter:"
    );
    assert_eq!(
        body["acknowledge"]["security"],
        json!([
            "Field and document level access control will be disabled.",
            "Custom realms will be ignored.",
            "A custom authorization engine will be ignored."
        ])
    );
    assert_eq!(
        body["acknowledge"]["graph"],
        json!(["Graph will be disabled"])
    );
    assert_eq!(get_license(&cluster).await?["type"], "enterprise");
    assert_eq!(
        call(
            &cluster,
            Method::PUT,
            "/_license?acknowledge=true",
            Some(gold)
        )
        .await?,
        installed("valid")
    );
    assert_eq!(get_license(&cluster).await?["type"], "gold");

    // Refusals, as Elasticsearch words them.
    let mut no_issuer = license("enterprise", now - DAY, now + DAY);
    if let Some(fields) = no_issuer["license"].as_object_mut() {
        fields.remove("issuer");
    }
    let mut with_nodes = license("enterprise", now - DAY, now + DAY);
    with_nodes["license"]["max_nodes"] = json!(5);
    for (body, status, error_type, reason) in [
        (
            license("basic", now - DAY, now + DAY),
            400,
            "illegal_argument_exception",
            "Installing basic licenses is no longer allowed. Use the POST /_license/start_basic API to install a basic license that does not expire.",
        ),
        (
            no_issuer,
            500,
            "illegal_state_exception",
            "issuer can not be null",
        ),
        (
            with_nodes,
            500,
            "illegal_state_exception",
            "maxNodes may not be set for enterprise licenses (type=[enterprise])",
        ),
        (
            json!({}),
            400,
            "parse_exception",
            "failed to parse licenses expected field",
        ),
        (
            json!({"licenses": {"type": "gold"}}),
            400,
            "parse_exception",
            "failed to parse licenses expected an array of licenses",
        ),
        (
            license("diamond", now - DAY, now + DAY),
            400,
            "illegal_argument_exception",
            "unknown license type [diamond]",
        ),
    ] {
        let (got, answer) = call(&cluster, Method::PUT, "/_license", Some(body.clone())).await?;
        assert_eq!(got, status, "{body}: {answer}");
        assert_eq!(answer["error"]["type"], error_type, "{answer}");
        assert_eq!(answer["error"]["reason"], reason, "{answer}");
    }
    let (status, body) = call(&cluster, Method::PUT, "/_license", None).await?;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"]["reason"],
        "The license must be provided in the request body"
    );
    let (status, body) = call(
        &cluster,
        Method::PUT,
        "/_license?force=true",
        Some(license("enterprise", now - DAY, now + DAY)),
    )
    .await?;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "illegal_argument_exception");
    assert_eq!(get_license(&cluster).await?["type"], "gold");

    // Deleting the license goes back to basic.
    let (status, body) = call(&cluster, Method::DELETE, "/_license", None).await?;
    assert_eq!((status, body), (200, json!({"acknowledged": true})));
    assert_eq!(get_license(&cluster).await?["type"], "basic");
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn a_license_expires_while_the_cluster_runs() -> TestResult {
    let root = tempfile::tempdir()?;
    let cluster = with_snapshot("expiring", root.path()).await?;
    let now = now()?;
    let (status, body) = call(
        &cluster,
        Method::PUT,
        "/_license",
        Some(license("enterprise", now - DAY, now + 2_000)),
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["license_status"], "valid");
    let (status, body) = mount(&cluster, "while-valid").await?;
    assert_eq!(status, 200, "{body}");

    eventually("the license expires", || async {
        Ok(get_license(&cluster).await?["status"] == "expired")
    })
    .await?;
    let expired = get_license(&cluster).await?;
    assert_eq!(expired["type"], "enterprise");
    let (status, body) = mount(&cluster, "after-expiry").await?;
    assert_eq!((status, body), (403, non_compliant("searchable-snapshots")));
    // An expired license is not basic: basic may be started.
    assert_eq!(eligible(&cluster, "basic").await?, json!(true));
    // Data operations go on.
    let (status, body) = call(&cluster, Method::GET, "/while-valid/_count", None).await?;
    assert_eq!((status, &body["count"]), (200, &json!(3)), "{body}");
    cluster.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn a_cluster_remembers_its_trial_across_restarts() -> TestResult {
    let root = tempfile::tempdir()?;
    let data = root.path().join("data");
    let boot = || async {
        let config = SimConfig::new("remembers")
            .with_fs_root(root.path())
            .with_data_path(&data);
        Fallible::Ok(SimulatedCluster::start(config).await?)
    };
    let first = boot().await?;
    start_trial(&first).await?;
    let trial = get_license(&first).await?;
    first.shutdown().await?;

    let second = boot().await?;
    let kept = get_license(&second).await?;
    assert_eq!(kept, trial);
    assert_eq!(eligible(&second, "trial").await?, json!(false));
    let (status, body) = call(
        &second,
        Method::POST,
        "/_license/start_basic?acknowledge=true",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    second.shutdown().await?;

    // On basic again after a restart, the trial is still spent.
    let third = boot().await?;
    assert_eq!(get_license(&third).await?["type"], "basic");
    assert_eq!(eligible(&third, "trial").await?, json!(false));
    let (status, body) = call(
        &third,
        Method::POST,
        "/_license/start_trial?acknowledge=true",
        None,
    )
    .await?;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["error_message"],
        "Operation failed: Trial was already activated."
    );
    third.shutdown().await?;
    Ok(())
}
