//! The KMS cipher against moto's KMS (127.0.0.1, started by scripts/test.sh),
//! through the real `aws-sdk-kms` client.

use floe_secrets::{Cipher, Ciphers, LocalCipher, Owner};
use floe_secrets_kms::KmsCipher;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Moto's endpoint, region and test credentials, loaded as a process
/// loads its shared configuration.
async fn sdk() -> Result<aws_config::SdkConfig, Box<dyn std::error::Error>> {
    let endpoint = std::env::var("FLOE_TEST_AWS_ENDPOINT").map_err(|_| {
        "FLOE_TEST_AWS_ENDPOINT is not set: run scripts/test.sh, which starts moto on 127.0.0.1 and sets it"
    })?;
    Ok(aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_kms::config::Credentials::new(
            "test",
            "test",
            None,
            None,
            "floe-tests",
        ))
        .load()
        .await)
}

#[tokio::test]
async fn kms_seals_and_opens_bound_to_the_owner() -> TestResult {
    let sdk = sdk().await?;
    let client = aws_sdk_kms::Client::new(&sdk);
    let key = client
        .create_key()
        .description("floe test key")
        .send()
        .await?;
    let key_id = key
        .key_metadata()
        .map(|m| m.key_id().to_string())
        .ok_or("no key id")?;
    let cipher = KmsCipher::new(&sdk, key_id);
    let owner = Owner {
        org: "acme",
        repository: "main",
        field: "secret_key",
    };

    let sealed = cipher.seal("kms-canary-secret", &owner).await?;
    assert!(sealed.starts_with("kms:v1:"));
    assert!(!sealed.contains("kms-canary-secret"));
    assert_eq!(cipher.open(&sealed, &owner).await?, "kms-canary-secret");
    let elsewhere = Owner {
        repository: "other",
        ..owner.clone()
    };
    assert!(
        cipher.open(&sealed, &elsewhere).await.is_err(),
        "the encryption context binds the owner"
    );

    // Production seals with KMS and still opens what a local key sealed.
    let local = LocalCipher::from_key(&[3u8; 32]);
    let locally_sealed = local.seal("older-secret", &owner).await?;
    let both = Ciphers::new(Box::new(cipher), Some(LocalCipher::from_key(&[3u8; 32])));
    assert_eq!(both.open(&locally_sealed, &owner).await?, "older-secret");
    assert!(both.seal("new", &owner).await?.starts_with("kms:v1:"));
    Ok(())
}
