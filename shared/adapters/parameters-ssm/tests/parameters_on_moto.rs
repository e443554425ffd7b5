//! The SSM node parameters against moto's Parameter Store (127.0.0.1,
//! started by scripts/test.sh), through the real `aws-sdk-ssm` client: the
//! port's scenario, what Parameter Store records for each kind of value, and
//! how its failures reach the port (injected into the responses, as moto
//! never fails on its own).

use aws_sdk_ssm::Client;
use aws_sdk_ssm::config::http::{HttpRequest, HttpResponse};
use aws_sdk_ssm::config::retry::RetryConfig;
use aws_sdk_ssm::config::{BehaviorVersion, Credentials, Region, SharedCredentialsProvider};
use aws_sdk_ssm::types::{ParameterStringFilter, ParameterTier, ParameterType};
use aws_smithy_runtime_api::client::http::{
    HttpClient as _, HttpConnector, HttpConnectorFuture, SharedHttpConnector, http_client_fn,
};
use floe_compute::parameters::{INVALID_PARAMETER, parameter_name};
use floe_compute::parameters_conformance::{self, DEPLOYMENT_PARAMETERS};
use floe_compute::{ComputeError, NodeParameters, SecretOrPlain};
use floe_compute_sim::SimulatedParameters;
use floe_parameters_ssm::{ACCESS_DENIED, SsmParameters, SsmParametersConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type TestResult = Result<(), BoxError>;

const KEY: &str = "alias/floe-test-parameters";

/// Moto's endpoint, region and test credentials: what the adapter and the
/// test's own client are built from.
fn sdk() -> Result<aws_config::SdkConfig, BoxError> {
    let endpoint = std::env::var("FLOE_TEST_AWS_ENDPOINT").map_err(|_| {
        "FLOE_TEST_AWS_ENDPOINT is not set: run scripts/test.sh, which starts moto on 127.0.0.1 and sets it"
    })?;
    Ok(aws_config::SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "test",
            "test",
            None,
            None,
            "floe-tests",
        )))
        .build())
}

fn client() -> Result<Client, BoxError> {
    Ok(Client::new(&sdk()?))
}

/// A fresh root path per test, so that tests can share one moto.
fn root() -> String {
    format!("/floe-test/{}", uuid::Uuid::new_v4().simple())
}

fn with_key() -> SsmParametersConfig {
    SsmParametersConfig {
        kms_key_id: Some(KEY.to_owned()),
    }
}

fn failure_type<T: std::fmt::Debug>(result: Result<T, ComputeError>) -> String {
    match result {
        Err(ComputeError::Permanent { failure_type, .. }) => failure_type,
        Err(ComputeError::Transient { code, .. }) => format!("<transient {code}>"),
        other => format!("{other:?}"),
    }
}

/// Parameter Store's own record of a parameter: type, tier and key.
async fn described(
    client: &Client,
    name: &str,
) -> Result<(Option<ParameterType>, Option<ParameterTier>, Option<String>), BoxError> {
    let out = client
        .describe_parameters()
        .parameter_filters(
            ParameterStringFilter::builder()
                .key("Name")
                .option("Equals")
                .values(name)
                .build()?,
        )
        .send()
        .await?;
    let [p] = out.parameters() else {
        return Err(format!("DescribeParameters {name}: {:?}", out.parameters()).into());
    };
    Ok((
        p.r#type().cloned(),
        p.tier().cloned(),
        p.key_id().map(str::to_owned),
    ))
}

async fn count_under(client: &Client, path: &str) -> Result<usize, BoxError> {
    let mut count = 0;
    let mut token: Option<String> = None;
    loop {
        let page = client
            .get_parameters_by_path()
            .path(path)
            .recursive(true)
            .set_next_token(token.take())
            .send()
            .await?;
        count += page.parameters().len();
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_owned()),
            _ => return Ok(count),
        }
    }
}

#[tokio::test]
async fn the_port_scenario_passes_on_parameter_store() -> TestResult {
    let ssm = SsmParameters::new(&sdk()?, with_key());
    parameters_conformance::scenario(&ssm, &root()).await
}

#[tokio::test]
async fn the_port_scenario_passes_on_the_simulation() -> TestResult {
    let sim = SimulatedParameters::default();
    parameters_conformance::scenario(&sim, &root()).await?;
    assert!(sim.written().is_empty());
    Ok(())
}

#[tokio::test]
async fn plain_values_are_strings_and_secrets_secure_strings_under_the_key() -> TestResult {
    let client = client()?;
    let ssm = SsmParameters::new(&sdk()?, with_key());
    let root = root();
    let plain_name = parameter_name(&root, "initial_master_nodes");
    let secret_name = parameter_name(&root, "repository/secret_key");
    let plain = SecretOrPlain::plain("i-0a1,i-0b2");
    let secret = SecretOrPlain::secret("wJalrXUtnFEMI/K7MDENG");

    ssm.put(&plain_name, &plain).await?;
    ssm.put(&secret_name, &secret).await?;

    assert_eq!(ssm.get(&plain_name).await?, Some(plain));
    assert_eq!(ssm.get(&secret_name).await?, Some(secret.clone()));
    assert_eq!(
        described(&client, &plain_name).await?,
        (
            Some(ParameterType::String),
            Some(ParameterTier::Standard),
            None
        )
    );
    assert_eq!(
        described(&client, &secret_name).await?,
        (
            Some(ParameterType::SecureString),
            Some(ParameterTier::Standard),
            Some(KEY.to_owned())
        )
    );

    // Without a configured key, Parameter Store picks the account's.
    let default_key = SsmParameters::new(&sdk()?, SsmParametersConfig::default());
    let other = parameter_name(&root, "repository/access_key");
    default_key.put(&other, &secret).await?;
    let (kind, _, key) = described(&client, &other).await?;
    assert_eq!(kind, Some(ParameterType::SecureString));
    assert_ne!(key.as_deref(), Some(KEY));
    assert_eq!(default_key.get(&other).await?, Some(secret));
    Ok(())
}

#[tokio::test]
async fn put_overwrites_a_parameter_with_a_new_version() -> TestResult {
    let client = client()?;
    let ssm = SsmParameters::new(&sdk()?, with_key());
    let name = parameter_name(&root(), "initial_master_nodes");
    for (n, ids) in ["i-1,i-2,i-3", "i-1", "i-1"].iter().enumerate() {
        ssm.put(&name, &SecretOrPlain::plain(*ids)).await?;
        let raw = client.get_parameter().name(&name).send().await?;
        let p = raw.parameter().ok_or("no parameter")?;
        assert_eq!(p.value(), Some(*ids));
        assert_eq!(p.version(), n as i64 + 1);
    }
    assert_eq!(ssm.get(&name).await?, Some(SecretOrPlain::plain("i-1")));
    Ok(())
}

#[tokio::test]
async fn delete_succeeds_whether_or_not_the_parameter_exists() -> TestResult {
    let ssm = SsmParameters::new(&sdk()?, with_key());
    let name = parameter_name(&root(), "initial_master_nodes");
    ssm.delete(&name).await?;
    ssm.put(&name, &SecretOrPlain::plain("i-1")).await?;
    ssm.delete(&name).await?;
    assert_eq!(ssm.get(&name).await?, None);
    ssm.delete(&name).await?;
    Ok(())
}

#[tokio::test]
async fn delete_under_removes_one_deployments_parameters_and_no_others() -> TestResult {
    let client = client()?;
    let ssm = SsmParameters::new(&sdk()?, with_key());
    let root = root();
    let one = format!("{root}/dep-one");
    let two = format!("{root}/dep-two");
    for (i, name) in parameters_conformance::deployment_parameter_names()
        .iter()
        .enumerate()
    {
        let value = SecretOrPlain::secret(format!("s-{i}"));
        ssm.put(&parameter_name(&one, name), &value).await?;
        if i < 12 {
            ssm.put(&parameter_name(&two, name), &value).await?;
        }
    }
    assert_eq!(count_under(&client, &one).await?, DEPLOYMENT_PARAMETERS);
    assert_eq!(count_under(&client, &two).await?, 12);

    assert_eq!(ssm.delete_under(&one).await?, DEPLOYMENT_PARAMETERS);
    assert_eq!(count_under(&client, &one).await?, 0);
    assert_eq!(count_under(&client, &two).await?, 12);
    assert_eq!(ssm.delete_under(&one).await?, 0);
    assert_eq!(ssm.delete_under(&two).await?, 12);
    Ok(())
}

#[tokio::test]
async fn requests_parameter_store_refuses_are_refused_before_any_call() -> TestResult {
    // No endpoint at all: a call would fail as unreachable, not as invalid.
    let nowhere = sdk()?
        .to_builder()
        .endpoint_url("http://127.0.0.1:1")
        .retry_config(RetryConfig::disabled())
        .build();
    let ssm = SsmParameters::new(&nowhere, with_key());
    let too_big = SecretOrPlain::secret("x".repeat(4097));
    assert_eq!(
        failure_type(ssm.put("/floe/p", &too_big).await),
        INVALID_PARAMETER
    );
    assert_eq!(failure_type(ssm.get("/aws/p").await), INVALID_PARAMETER);
    assert_eq!(
        failure_type(ssm.delete("/floe/a b").await),
        INVALID_PARAMETER
    );
    assert_eq!(
        failure_type(ssm.delete_under("floe").await),
        INVALID_PARAMETER
    );
    // And a valid request really does go out.
    assert_eq!(
        failure_type(ssm.get("/floe/p").await),
        "<transient ssm_unreachable>"
    );
    Ok(())
}

/// Replaces the answers to one operation with an error, the first `times`
/// times, after moto has handled the request.
#[derive(Debug)]
struct InjectError {
    operation: &'static str,
    code: &'static str,
    status: u16,
    times: AtomicU32,
    seen: Arc<AtomicU32>,
}

impl InjectError {
    fn new(operation: &'static str, code: &'static str, status: u16, times: u32) -> InjectError {
        InjectError {
            operation,
            code,
            status,
            times: AtomicU32::new(times),
            seen: Arc::new(AtomicU32::new(0)),
        }
    }
}

impl InjectError {
    /// Whether this request is to the operation whose answers are replaced:
    /// the JSON protocol names the operation in this header.
    fn matches(&self, request: &HttpRequest) -> bool {
        let target = request.headers().get("x-amz-target").unwrap_or_default();
        target == format!("AmazonSSM.{}", self.operation)
    }

    /// Replaces moto's answer, the first `times` times.
    fn replace(&self, response: &mut HttpResponse) -> Result<(), BoxError> {
        self.seen.fetch_add(1, Ordering::SeqCst);
        if self
            .times
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_err()
        {
            return Ok(());
        }
        *response.status_mut() = self.status.try_into()?;
        response.headers_mut().remove("content-length");
        *response.body_mut() = format!(
            r#"{{"__type":"{}","message":"injected by the test"}}"#,
            self.code
        )
        .into();
        Ok(())
    }
}

/// The SDK configuration's HTTP connector, with a fault on the way back.
#[derive(Debug)]
struct Faulty {
    inner: SharedHttpConnector,
    fault: Arc<InjectError>,
}

impl HttpConnector for Faulty {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let matches = self.fault.matches(&request);
        let answer = self.inner.call(request);
        let fault = self.fault.clone();
        HttpConnectorFuture::new(async move {
            let mut response = answer.await?;
            if matches {
                fault.replace(&mut response).map_err(|e| {
                    aws_smithy_runtime_api::client::result::ConnectorError::other(e, None)
                })?;
            }
            Ok(response)
        })
    }
}

fn faulty(fault: InjectError) -> Result<SsmParameters, BoxError> {
    let fault = Arc::new(fault);
    let inner = aws_smithy_http_client::Builder::new().build_http();
    let sdk = sdk()?
        .to_builder()
        .retry_config(RetryConfig::disabled())
        .http_client(http_client_fn(move |settings, components| {
            SharedHttpConnector::new(Faulty {
                inner: inner.http_connector(settings, components),
                fault: fault.clone(),
            })
        }))
        .build();
    Ok(SsmParameters::new(&sdk, with_key()))
}

#[tokio::test]
async fn throttling_and_server_errors_are_transient() -> TestResult {
    let name = parameter_name(&root(), "initial_master_nodes");
    let v = SecretOrPlain::plain("i-1");
    let ssm = faulty(InjectError::new(
        "PutParameter",
        "ThrottlingException",
        400,
        1,
    ))?;
    assert_eq!(
        failure_type(ssm.put(&name, &v).await),
        "<transient ThrottlingException>"
    );
    ssm.put(&name, &v).await?;
    let ssm = faulty(InjectError::new(
        "GetParameter",
        "InternalServerError",
        500,
        1,
    ))?;
    assert_eq!(
        failure_type(ssm.get(&name).await),
        "<transient InternalServerError>"
    );
    let ssm = faulty(InjectError::new(
        "GetParametersByPath",
        "SomethingNew",
        503,
        1,
    ))?;
    assert_eq!(
        failure_type(ssm.delete_under(&name).await),
        "<transient SomethingNew>"
    );
    Ok(())
}

#[tokio::test]
async fn refusals_are_permanent_with_a_failure_type() -> TestResult {
    let root = root();
    let name = parameter_name(&root, "repository/secret_key");
    let secret = SecretOrPlain::secret("s3cr3t-value");
    for operation in ["PutParameter", "DeleteParameter", "DeleteParameters"] {
        let ssm = faulty(InjectError::new(operation, "AccessDeniedException", 400, 1))?;
        let result = match operation {
            "PutParameter" => ssm.put(&name, &secret).await,
            "DeleteParameter" => ssm.delete(&name).await,
            _ => {
                ssm.put(&name, &secret).await?;
                ssm.delete_under(&root).await.map(|_| ())
            }
        };
        let err = result.err().ok_or(format!("{operation} succeeded"))?;
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains(operation), "{shown}");
        assert_eq!(failure_type::<()>(Err(err)), ACCESS_DENIED, "{operation}");
    }
    let ssm = faulty(InjectError::new("PutParameter", "InvalidKeyId", 400, 1))?;
    assert_eq!(
        failure_type(ssm.put(&name, &secret).await),
        floe_parameters_ssm::KMS_KEY_INVALID
    );
    Ok(())
}

#[tokio::test]
async fn a_type_parameter_store_will_not_change_in_place_is_recreated() -> TestResult {
    let client = client()?;
    let name = parameter_name(&root(), "initial_master_nodes");
    SsmParameters::new(&sdk()?, with_key())
        .put(&name, &SecretOrPlain::plain("i-1"))
        .await?;
    // AWS answers a type change with this error; moto makes the change.
    let fault = InjectError::new("PutParameter", "HierarchyTypeMismatchException", 400, 1);
    let puts = Arc::clone(&fault.seen);
    let ssm = faulty(fault)?;
    let secret = SecretOrPlain::secret("i-2");
    ssm.put(&name, &secret).await?;
    assert_eq!(puts.load(Ordering::SeqCst), 2, "put, delete, put again");
    assert_eq!(ssm.get(&name).await?, Some(secret));
    let (kind, _, _) = described(&client, &name).await?;
    assert_eq!(kind, Some(ParameterType::SecureString));
    // Recreated, so its history starts over.
    let raw = client.get_parameter().name(&name).send().await?;
    assert_eq!(raw.parameter().map(|p| p.version()), Some(1));
    Ok(())
}
