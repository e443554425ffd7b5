//! The IAM adapter against moto's IAM (127.0.0.1, started by
//! scripts/test.sh), checked through the IAM API itself: the role, its
//! boundary and inline policy, the instance profile, and that ensuring and
//! forgetting twice is the same as once.

use std::error::Error;

use aws_sdk_iam::Client;
use floe_compute::{NodeIdentity, PathAccess, SnapshotPath, node_identity_name};
use floe_identity_iam::{DEFAULT_PATH, IamIdentity, IamIdentityConfig, POLICY_NAME};

type TestResult = Result<(), Box<dyn Error>>;

const BOUNDARY: &str = "arn:aws:iam::123456789012:policy/floe-node-boundary";
const PARAMETERS: &str = "arn:aws:ssm:us-east-1:123456789012:parameter/floe";

fn sdk() -> Result<aws_config::SdkConfig, Box<dyn Error>> {
    let endpoint = std::env::var("FLOE_TEST_AWS_ENDPOINT").map_err(|_| {
        "FLOE_TEST_AWS_ENDPOINT is not set: run scripts/test.sh, which starts moto on 127.0.0.1 and sets it"
    })?;
    // Only a loopback moto: these tests create and delete IAM roles.
    let host = endpoint
        .strip_prefix("http://")
        .ok_or("FLOE_TEST_AWS_ENDPOINT must be an http:// loopback address")?;
    if !(host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")) {
        return Err(format!("FLOE_TEST_AWS_ENDPOINT {endpoint} is not a loopback address").into());
    }
    Ok(aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_iam::config::SharedCredentialsProvider::new(
            aws_sdk_iam::config::Credentials::new("test", "test", None, None, "moto"),
        ))
        .build())
}

fn config() -> IamIdentityConfig {
    IamIdentityConfig {
        path: DEFAULT_PATH.into(),
        permissions_boundary: BOUNDARY.into(),
        parameters_arn: PARAMETERS.into(),
        kms_key_arn: None,
        snapshot_buckets: Vec::new(),
    }
}

fn deployment() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// The role's inline policy document, decoded (IAM answers it URL-encoded).
async fn policy_of(client: &Client, role: &str) -> Result<serde_json::Value, Box<dyn Error>> {
    let out = client
        .get_role_policy()
        .role_name(role)
        .policy_name(POLICY_NAME)
        .send()
        .await?;
    let raw = out.policy_document();
    let text = if raw.trim_start().starts_with('{') {
        raw.to_owned()
    } else {
        percent_decode(raw)?
    };
    Ok(serde_json::from_str(&text)?)
}

fn percent_decode(s: &str) -> Result<String, Box<dyn Error>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3).ok_or("truncated escape")?;
                out.push(u8::from_str_radix(hex, 16)?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8(out)?)
}

#[tokio::test]
async fn ensure_makes_a_bounded_role_reading_only_its_own_parameters() -> TestResult {
    let sdk = sdk()?;
    let client = Client::new(&sdk);
    let identity = IamIdentity::new(&sdk, config());
    let id = deployment();
    let other = deployment();
    let name = node_identity_name(&id);

    let profile = identity.ensure(&id, &[]).await?;
    // Twice: the same profile, nothing created twice.
    assert_eq!(identity.ensure(&id, &[]).await?, profile);
    identity.ensure(&other, &[]).await?;
    assert!(
        profile.ends_with(&format!(":instance-profile{DEFAULT_PATH}{name}")),
        "{profile}"
    );

    let role = client.get_role().role_name(&name).send().await?;
    let role = role.role().ok_or("no role")?;
    assert_eq!(role.path(), DEFAULT_PATH);
    assert_eq!(
        role.permissions_boundary()
            .and_then(|b| b.permissions_boundary_arn()),
        Some(BOUNDARY)
    );
    let trust = percent_decode(role.assume_role_policy_document().unwrap_or_default())?;
    assert!(trust.contains("ec2.amazonaws.com"), "{trust}");

    let policy = policy_of(&client, &name).await?;
    let text = policy.to_string();
    assert!(
        text.contains(&format!("\"{PARAMETERS}/{id}/*\"")),
        "the policy names the deployment's own path: {text}"
    );
    assert!(!text.contains(&other), "another deployment's path: {text}");
    assert_eq!(
        text.matches("parameter/").count(),
        1,
        "one parameter resource only: {text}"
    );
    for statement in policy["Statement"].as_array().ok_or("no statements")? {
        let actions = statement["Action"].to_string();
        if actions.contains("ssm:") {
            assert_eq!(statement["Resource"], format!("{PARAMETERS}/{id}/*"));
        }
    }

    let got = client
        .get_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await?;
    let got = got.instance_profile().ok_or("no profile")?;
    let roles: Vec<&str> = got.roles().iter().map(|r| r.role_name()).collect();
    assert_eq!(roles, [name.as_str()]);
    assert_eq!(got.path(), DEFAULT_PATH);

    // Forget twice: the second finds nothing and succeeds.
    identity.forget(&id).await?;
    identity.forget(&id).await?;
    let role_gone = client.get_role().role_name(&name).send().await;
    assert!(role_gone.is_err(), "the role is still there");
    let profile_gone = client
        .get_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await;
    assert!(profile_gone.is_err(), "the instance profile is still there");
    // The other deployment's identity is untouched.
    client
        .get_role()
        .role_name(node_identity_name(&other))
        .send()
        .await?;
    identity.forget(&other).await?;
    Ok(())
}

#[tokio::test]
async fn forget_takes_apart_what_a_half_done_ensure_left() -> TestResult {
    let sdk = sdk()?;
    let client = Client::new(&sdk);
    let managed = client
        .create_policy()
        .policy_name(format!("floe-node-extra-{}", deployment()))
        .policy_document(r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:ListBucket","Resource":"arn:aws:s3:::floe-snapshots"}]}"#)
        .send()
        .await?;
    let managed_arn = managed
        .policy()
        .and_then(|p| p.arn())
        .ok_or("no policy arn")?
        .to_owned();
    let identity = IamIdentity::new(&sdk, config());
    let id = deployment();
    let name = node_identity_name(&id);
    identity.ensure(&id, &[]).await?;
    // Floe attaches none; an operator may have.
    client
        .attach_role_policy()
        .role_name(&name)
        .policy_arn(&managed_arn)
        .send()
        .await?;
    let attached = client
        .list_attached_role_policies()
        .role_name(&name)
        .send()
        .await?;
    assert_eq!(
        attached
            .attached_policies()
            .iter()
            .filter_map(|p| p.policy_arn())
            .collect::<Vec<_>>(),
        [managed_arn.as_str()]
    );
    // A crash between the steps of a forget: the profile is gone, the
    // role (with its policies) is not.
    client
        .remove_role_from_instance_profile()
        .instance_profile_name(&name)
        .role_name(&name)
        .send()
        .await?;
    client
        .delete_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await?;
    // The forget still detaches what it did not attach.
    identity.forget(&id).await?;
    assert!(client.get_role().role_name(&name).send().await.is_err());
    Ok(())
}

#[tokio::test]
async fn a_role_outside_the_path_is_never_taken_over() -> TestResult {
    let sdk = sdk()?;
    let client = Client::new(&sdk);
    let id = deployment();
    let name = node_identity_name(&id);
    client
        .create_role()
        .path("/somebody-else/")
        .role_name(&name)
        .assume_role_policy_document(r#"{"Version":"2012-10-17","Statement":[]}"#)
        .send()
        .await?;
    let identity = IamIdentity::new(&sdk, config());
    let refused = identity.ensure(&id, &[]).await;
    assert!(
        matches!(&refused, Err(floe_compute::ComputeError::Permanent { failure_type, .. }) if failure_type == "node_identity_conflict"),
        "{refused:?}"
    );
    assert!(identity.forget(&id).await.is_err());
    client.get_role().role_name(&name).send().await?;
    client.delete_role().role_name(&name).send().await?;
    Ok(())
}

#[tokio::test]
async fn a_role_reaches_the_granted_snapshot_paths_and_no_others() -> TestResult {
    let sdk = sdk()?;
    let client = Client::new(&sdk);
    let mut with_buckets = config();
    with_buckets.snapshot_buckets = vec!["floe-snaps".into()];
    let identity = IamIdentity::new(&sdk, with_buckets);
    let id = deployment();
    let source = deployment();
    let name = node_identity_name(&id);
    let own = SnapshotPath {
        bucket: "floe-snaps".into(),
        prefix: format!("prod/{id}"),
        access: PathAccess::ReadWrite,
    };
    let read = SnapshotPath {
        bucket: "floe-snaps".into(),
        prefix: format!("prod/{source}"),
        access: PathAccess::ReadOnly,
    };
    identity.ensure(&id, &[own.clone(), read]).await?;
    let text = policy_of(&client, &name).await?.to_string();
    assert!(
        text.contains(&format!("arn:aws:s3:::floe-snaps/prod/{id}/*")),
        "{text}"
    );
    assert!(
        text.contains(&format!("arn:aws:s3:::floe-snaps/prod/{source}/*")),
        "{text}"
    );
    assert!(
        !text.contains("arn:aws:s3:::floe-snaps/*"),
        "the whole bucket: {text}"
    );

    // The restore is over: the next ensure grants the own path only, and
    // the source's path is gone from the role.
    identity.ensure(&id, &[own]).await?;
    let text = policy_of(&client, &name).await?.to_string();
    assert!(
        text.contains(&format!("arn:aws:s3:::floe-snaps/prod/{id}/*")),
        "{text}"
    );
    assert!(!text.contains(&source), "the source's path stayed: {text}");

    // A bucket the stack does not allow is refused, and changes nothing.
    let elsewhere = SnapshotPath {
        bucket: "someone-elses".into(),
        prefix: id.clone(),
        access: PathAccess::ReadOnly,
    };
    let refused = identity.ensure(&id, &[elsewhere]).await;
    assert!(
        matches!(&refused, Err(floe_compute::ComputeError::Permanent { failure_type, .. }) if failure_type == "snapshot_bucket_not_allowed"),
        "{refused:?}"
    );
    let text = policy_of(&client, &name).await?.to_string();
    assert!(
        text.contains(&format!("arn:aws:s3:::floe-snaps/prod/{id}/*")),
        "{text}"
    );
    identity.forget(&id).await?;
    Ok(())
}
