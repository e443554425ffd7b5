//! API keys through the router: made once and shown once, taken wherever a
//! bearer token is with the key's organization and roles, refused the
//! moment they are deleted or expire, kept only as keyed hashes, and
//! managed by platform admins for the users of their organization.

mod support;

use axum::http::StatusCode;
use floe_auth::Role;
use serde_json::{Value, json};
use support::{Api, Reply, TestResult, api_and_store, roles_token, token};

type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

const KEYS: &str = "/api/v1/users/auth/keys";
const DEPLOYMENTS: &str = "/api/v1/deployments";

fn deployment(name: &str) -> Value {
    json!({"name": name, "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "data_content"],
            "instance_type": "m6g.xlarge", "count": 1, "zone_count": 1,
            "storage": {"size_gb": 50}}]})
}

/// A request sent with `Authorization: ApiKey {key}`.
async fn with_key(
    api: &Api,
    key: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Fallible<Reply> {
    let auth = format!("ApiKey {key}");
    api.call(method, path, None, &[("authorization", &auth)], body)
        .await
}

/// Makes a key with `token`; answers the creation's body.
async fn make(api: &Api, token: &str, body: Value) -> Fallible<Value> {
    let made = api.call("POST", KEYS, Some(token), &[], Some(body)).await?;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    Ok(made.body)
}

fn key_of(made: &Value) -> Fallible<String> {
    Ok(made["key"].as_str().ok_or("no key")?.to_string())
}

#[tokio::test]
async fn a_key_acts_with_its_organization_and_roles_wherever_a_token_does() -> TestResult {
    let (api, _) = api_and_store()?;
    let manager = token("acme", Role::DeploymentManager);
    let made = make(
        &api,
        &manager,
        json!({"description": "nightly export job", "expiration": "90d"}),
    )
    .await?;
    assert_eq!(made["roles"], json!(["deployment_manager"]), "{made}");
    assert_eq!(made["user_id"], "tester");
    assert_eq!(made["description"], "nightly export job");
    assert_eq!(made["expired"], false);
    let expires = made["expiration_date"].as_str().ok_or("no expiration")?;
    let expires = chrono::DateTime::parse_from_rfc3339(expires)?;
    let days = (expires.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_days();
    assert!((89..=90).contains(&days), "{made}");
    let key = key_of(&made)?;

    // The key creates and reads as its maker would.
    let created = with_key(&api, &key, "POST", DEPLOYMENTS, Some(deployment("by-key"))).await?;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let listed = with_key(&api, &key, "GET", DEPLOYMENTS, None).await?;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(listed.body["deployments"][0]["name"], "by-key");
    // The scheme's case does not matter (RFC 9110).
    let lower = api
        .call(
            "GET",
            DEPLOYMENTS,
            None,
            &[("authorization", &format!("apikey {key}"))],
            None,
        )
        .await?;
    assert_eq!(lower.status, StatusCode::OK);

    // Another organization's deployment is not the key's to see.
    let globex = api
        .call(
            "POST",
            DEPLOYMENTS,
            Some(&token("globex", Role::DeploymentManager)),
            &[],
            Some(deployment("theirs")),
        )
        .await?;
    let theirs = globex.body["id"].as_str().ok_or("id")?;
    let foreign = with_key(&api, &key, "GET", &format!("{DEPLOYMENTS}/{theirs}"), None).await?;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND, "{}", foreign.body);
    // Nor may it act in another organization: it holds no platform role.
    let header = format!("ApiKey {key}");
    let elsewhere = api
        .call(
            "GET",
            DEPLOYMENTS,
            None,
            &[
                ("authorization", &header),
                ("x-floe-organization", "globex"),
            ],
            None,
        )
        .await?;
    assert_eq!(elsewhere.status, StatusCode::FORBIDDEN);

    // A viewer's key reads and changes nothing.
    let viewer = make(
        &api,
        &roles_token("acme", &[Role::DeploymentManager, Role::DeploymentViewer]),
        json!({"description": "dashboard", "roles": ["deployment_viewer"]}),
    )
    .await?;
    let viewer = key_of(&viewer)?;
    let read = with_key(&api, &viewer, "GET", DEPLOYMENTS, None).await?;
    assert_eq!(read.status, StatusCode::OK);
    let refused = with_key(&api, &viewer, "POST", DEPLOYMENTS, Some(deployment("no"))).await?;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.code(), "auth.forbidden");
    Ok(())
}

#[tokio::test]
async fn a_key_is_shown_once_and_kept_as_a_keyed_hash() -> TestResult {
    let (api, store) = api_and_store()?;
    let admin = token("acme", Role::PlatformAdmin);
    let made = make(&api, &admin, json!({"description": "ci"})).await?;
    let key = key_of(&made)?;
    let id = made["id"].as_str().ok_or("id")?.to_string();
    let parts = floe_auth::api_key::parse(&key).ok_or("the key does not parse")?;

    let listed = api.call("GET", KEYS, Some(&admin), &[], None).await?;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(listed.body["keys"][0]["id"], json!(id));
    let all = api
        .call("GET", &format!("{KEYS}/_all"), Some(&admin), &[], None)
        .await?;
    for answer in [&listed.body, &all.body] {
        let text = answer.to_string();
        assert!(
            !text.contains(&key) && !text.contains(&parts.secret),
            "a listing shows the key: {text}"
        );
        assert!(answer["keys"][0].get("key").is_none());
    }

    let stored = store.get_api_key("acme", &id).await?.ok_or("not stored")?;
    let record = serde_json::to_string(&stored.value)?;
    assert!(!record.contains(&parts.secret) && !record.contains(&key));
    // The hashing key is kept sealed: only the cipher's key opens it, and
    // only the opened key checks the secret.
    let hashing = store
        .get_key_hashing_key("acme")
        .await?
        .ok_or("no hashing key")?;
    assert!(!floe_auth::api_key::matches(
        &hashing.sealed,
        &parts.secret,
        &stored.value.mac
    ));
    use floe_secrets::Cipher as _;
    let opened = floe_secrets::LocalCipher::from_key(&[7u8; 32])
        .open(
            &hashing.sealed,
            &floe_secrets::Owner {
                org: "acme",
                repository: "~api-keys",
                field: "hashing_key",
            },
        )
        .await?;
    assert_ne!(opened, hashing.sealed);
    assert!(floe_auth::api_key::matches(
        &opened,
        &parts.secret,
        &stored.value.mac
    ));

    // Its use is written down.
    assert!(stored.value.last_used.is_none());
    with_key(&api, &key, "GET", DEPLOYMENTS, None).await?;
    let used = store.get_api_key("acme", &id).await?.ok_or("gone")?;
    assert!(used.value.last_used.is_some());
    let listed = api.call("GET", KEYS, Some(&admin), &[], None).await?;
    assert!(
        listed.body["keys"][0]["last_used_date"].is_string(),
        "{}",
        listed.body
    );
    Ok(())
}

#[tokio::test]
async fn a_deleted_or_expired_key_is_refused_at_once() -> TestResult {
    let (api, store) = api_and_store()?;
    let manager = token("acme", Role::DeploymentManager);
    let made = make(&api, &manager, json!({"description": "to delete"})).await?;
    let key = key_of(&made)?;
    let id = made["id"].as_str().ok_or("id")?;
    assert_eq!(
        with_key(&api, &key, "GET", DEPLOYMENTS, None).await?.status,
        StatusCode::OK
    );
    let gone = api
        .call("DELETE", &format!("{KEYS}/{id}"), Some(&manager), &[], None)
        .await?;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{}", gone.body);
    let refused = with_key(&api, &key, "GET", DEPLOYMENTS, None).await?;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert_eq!(refused.code(), "auth.invalid_api_key");
    let again = api
        .call("DELETE", &format!("{KEYS}/{id}"), Some(&manager), &[], None)
        .await?;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    assert_eq!(again.code(), "api_keys.api_key_not_found");

    let made = make(
        &api,
        &manager,
        json!({"description": "short", "expiration": "1m"}),
    )
    .await?;
    let key = key_of(&made)?;
    let id = made["id"].as_str().ok_or("id")?;
    // What the passing of its minute does to the record.
    let stored = store.get_api_key("acme", id).await?.ok_or("stored")?;
    let mut past = stored.value.clone();
    past.expiration = Some(chrono::Utc::now() - chrono::Duration::seconds(1));
    store.update_api_key(&past, &stored).await?;
    let expired = with_key(&api, &key, "GET", DEPLOYMENTS, None).await?;
    assert_eq!(expired.status, StatusCode::UNAUTHORIZED);
    assert_eq!(expired.code(), "auth.api_key_expired");
    let listed = api.call("GET", KEYS, Some(&manager), &[], None).await?;
    assert_eq!(listed.body["keys"][0]["expired"], true, "{}", listed.body);
    Ok(())
}

#[tokio::test]
async fn text_that_is_no_live_key_is_refused() -> TestResult {
    let (api, _) = api_and_store()?;
    let made = make(
        &api,
        &token("acme", Role::DeploymentViewer),
        json!({"description": "x"}),
    )
    .await?;
    let key = key_of(&made)?;
    let parts = floe_auth::api_key::parse(&key).ok_or("parse")?;
    use base64::Engine;
    let b64 = |s: String| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    for (what, text) in [
        ("garbage", "not-a-key".to_string()),
        (
            "another secret",
            b64(format!("acme:{}:{}", parts.id, "A".repeat(43))),
        ),
        (
            "another organization",
            b64(format!("globex:{}:{}", parts.id, parts.secret)),
        ),
        (
            "an id that is none",
            b64(format!("acme:../../x:{}", parts.secret)),
        ),
        (
            "an organization that is none",
            b64(format!("ACME#:{}:{}", parts.id, parts.secret)),
        ),
    ] {
        let refused = with_key(&api, &text, "GET", DEPLOYMENTS, None).await?;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{what}");
        assert_eq!(refused.code(), "auth.invalid_api_key", "{what}");
    }
    let empty = api
        .call(
            "GET",
            DEPLOYMENTS,
            None,
            &[("authorization", "ApiKey ")],
            None,
        )
        .await?;
    assert_eq!(empty.status, StatusCode::UNAUTHORIZED);
    assert_eq!(empty.code(), "auth.missing_token");
    Ok(())
}

#[tokio::test]
async fn a_key_gets_at_most_its_makers_roles_and_bad_input_names_its_field() -> TestResult {
    let (api, _) = api_and_store()?;
    let manager = token("acme", Role::DeploymentManager);
    for (body, field, code) in [
        (
            json!({"description": ""}),
            "description",
            "validation.length",
        ),
        (
            json!({"description": "x".repeat(256)}),
            "description",
            "validation.length",
        ),
        (
            json!({"description": "a\u{7}b"}),
            "description",
            "validation.not_allowed",
        ),
        (
            json!({"description": "x", "expiration": "soon"}),
            "expiration",
            "validation.time_value",
        ),
        (
            json!({"description": "x", "expiration": "30s"}),
            "expiration",
            "validation.range",
        ),
        (
            json!({"description": "x", "expiration": "3651d"}),
            "expiration",
            "validation.range",
        ),
        (
            json!({"description": "x", "roles": []}),
            "roles",
            "validation.length",
        ),
        (
            json!({"description": "x", "roles": ["platform_admin"]}),
            "roles[0]",
            "validation.not_allowed",
        ),
        (
            json!({"description": "x", "roles": ["root"]}),
            "roles[0]",
            "validation.unknown_value",
        ),
        (
            json!({"description": "x", "roles": ["deployment_manager", "deployment_manager"]}),
            "roles[1]",
            "validation.duplicate",
        ),
        (
            json!({"description": "x", "key": "mine"}),
            "key",
            "validation.unknown_field",
        ),
    ] {
        let refused = api
            .call("POST", KEYS, Some(&manager), &[], Some(body.clone()))
            .await?;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            refused.body
        );
        assert_eq!(refused.code(), code, "{body}: {}", refused.body);
        assert_eq!(
            refused.body["errors"][0]["fields"],
            json!([field]),
            "{body}: {}",
            refused.body
        );
    }
    let listed = api.call("GET", KEYS, Some(&manager), &[], None).await?;
    assert_eq!(
        listed.body["keys"],
        json!([]),
        "a refused request made a key"
    );

    // A role within the maker's may be given: a platform admin may do
    // what a manager does, a manager reads what a viewer reads.
    let admin = token("acme", Role::PlatformAdmin);
    let narrowed = make(
        &api,
        &admin,
        json!({"description": "ops", "roles": ["deployment_manager"]}),
    )
    .await?;
    assert_eq!(narrowed["roles"], json!(["deployment_manager"]));
    let reader = make(
        &api,
        &manager,
        json!({"description": "ro", "roles": ["deployment_viewer"]}),
    )
    .await?;
    assert_eq!(reader["roles"], json!(["deployment_viewer"]));
    let viewer = token("acme", Role::PlatformViewer);
    let refused = api
        .call(
            "POST",
            KEYS,
            Some(&viewer),
            &[],
            Some(json!({"description": "x", "roles": ["deployment_manager"]})),
        )
        .await?;
    assert_eq!(refused.code(), "validation.not_allowed");

    // A key does not make keys.
    let key = key_of(&make(&api, &manager, json!({"description": "x"})).await?)?;
    let refused = with_key(&api, &key, "POST", KEYS, Some(json!({"description": "y"}))).await?;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    // It lists its maker's keys (the tokens here all name one person,
    // `tester`, whatever their roles: three keys).
    let listed = with_key(&api, &key, "GET", KEYS, None).await?;
    assert_eq!(listed.body["keys"].as_array().map(Vec::len), Some(3));
    Ok(())
}

#[tokio::test]
async fn a_platform_admin_sees_and_deletes_every_users_keys_in_the_organization() -> TestResult {
    let (api, _) = api_and_store()?;
    let alice = floe_auth::issue_hs256(
        support::SECRET,
        support::ISSUER,
        support::AUDIENCE,
        "alice",
        "acme",
        &[Role::DeploymentManager],
        std::time::Duration::from_secs(600),
    )?;
    let made = make(&api, &alice, json!({"description": "alice's"})).await?;
    let key = key_of(&made)?;
    let id = made["id"].as_str().ok_or("id")?;
    make(
        &api,
        &token("globex", Role::DeploymentManager),
        json!({"description": "globex's"}),
    )
    .await?;

    let admin = token("acme", Role::PlatformAdmin);
    // Her keys are not the admin's own.
    let own = api.call("GET", KEYS, Some(&admin), &[], None).await?;
    assert_eq!(own.body["keys"], json!([]));
    let all = api
        .call("GET", &format!("{KEYS}/_all"), Some(&admin), &[], None)
        .await?;
    assert_eq!(all.status, StatusCode::OK);
    let listed: Vec<&str> = all.body["keys"]
        .as_array()
        .ok_or("keys")?
        .iter()
        .filter_map(|k| k["description"].as_str())
        .collect();
    assert_eq!(listed, ["alice's"], "only acme's keys");
    let not_admin = api
        .call("GET", &format!("{KEYS}/_all"), Some(&alice), &[], None)
        .await?;
    assert_eq!(not_admin.status, StatusCode::FORBIDDEN);

    // Another user's id, or another user's key, is not found.
    let wrong = api
        .call(
            "DELETE",
            &format!("/api/v1/users/bob/auth/keys/{id}"),
            Some(&admin),
            &[],
            None,
        )
        .await?;
    assert_eq!(wrong.status, StatusCode::NOT_FOUND);
    let gone = api
        .call(
            "DELETE",
            &format!("/api/v1/users/alice/auth/keys/{id}"),
            Some(&admin),
            &[],
            None,
        )
        .await?;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{}", gone.body);
    let refused = with_key(&api, &key, "GET", DEPLOYMENTS, None).await?;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);

    // A platform admin of another organization manages acme's keys there.
    let globex_admin = token("globex", Role::PlatformAdmin);
    let theirs = api
        .call(
            "GET",
            &format!("{KEYS}/_all"),
            Some(&globex_admin),
            &[("x-floe-organization", "acme")],
            None,
        )
        .await?;
    assert_eq!(theirs.status, StatusCode::OK);
    assert_eq!(theirs.body["keys"], json!([]));
    Ok(())
}
