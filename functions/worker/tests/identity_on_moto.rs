//! The worker as deployed (`FLOE_COMPUTE=ec2`), its adapters built by the
//! real wiring (`WorkerConfig::read`, `Adapters::with_sdk`) against moto's
//! IAM, EC2, SSM, KMS and DynamoDB on loopback (issue 12, defect 7): a
//! create plan gives the deployment a node role and instance profile of its
//! own, whose policy reads that deployment's parameters only, its launch
//! template names that profile, and the delete plan removes role, policy
//! and profile.
//!
//! Only `wait-joined` and `license` are answered here: they talk to
//! Elasticsearch at the nodes' private addresses, which no test may reach.
//! Every other step runs as the worker runs it.

use async_trait::async_trait;
use aws_sdk_ec2::types::{ArchitectureValues, Filter};
use chrono::Utc;
use floe_compute::{TAG_DEPLOYMENT, node_identity_name};
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus};
use floe_domain::plan::{Plan, PlanParams, PlanStatus, StepError};
use floe_plans::{
    Engine, EngineConfig, LocalQueue, Outcome, PlanJob, RunResult, StepContext, Steps,
};
use floe_store::Store;
use floe_wiring::{Env, WorkerConfig};
use floe_worker::adapters::Adapters;
use serde_json::{Value, json};
use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

type TestResult = Result<(), Box<dyn Error>>;

const ORG: &str = "acme";
const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";

fn endpoint() -> Result<String, Box<dyn Error>> {
    let endpoint = std::env::var("FLOE_TEST_AWS_ENDPOINT").map_err(|_| {
        "FLOE_TEST_AWS_ENDPOINT is not set: run scripts/test.sh, which starts moto on 127.0.0.1 and sets it"
    })?;
    // Only a loopback moto: this test creates IAM roles and instances.
    let host = endpoint
        .strip_prefix("http://")
        .ok_or("FLOE_TEST_AWS_ENDPOINT must be an http:// loopback address")?;
    if !(host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")) {
        return Err(format!("FLOE_TEST_AWS_ENDPOINT {endpoint} is not a loopback address").into());
    }
    Ok(endpoint)
}

fn sdk(endpoint: &str) -> aws_config::SdkConfig {
    aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new(REGION))
        .credentials_provider(aws_sdk_iam::config::SharedCredentialsProvider::new(
            aws_sdk_iam::config::Credentials::new("test", "test", None, None, "moto"),
        ))
        .build()
}

/// What the template gives the worker's function: the network, the images
/// and the key made here, the boundary by ARN (IAM does not look it up
/// when a role is created with it).
struct Setup {
    vars: Vec<(&'static str, String)>,
    boundary: String,
}

async fn setup(sdk: &aws_config::SdkConfig) -> Result<Setup, Box<dyn Error>> {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let ec2 = aws_sdk_ec2::Client::new(sdk);
    let image = |arch: &'static str| {
        let ec2 = ec2.clone();
        async move {
            let out = ec2
                .describe_images()
                .filters(Filter::builder().name("architecture").values(arch).build())
                .send()
                .await?;
            out.images()
                .iter()
                .find(|i| i.architecture().map(ArchitectureValues::as_str) == Some(arch))
                .and_then(|i| i.image_id())
                .map(str::to_owned)
                .ok_or_else(|| Box::<dyn Error>::from(format!("moto has no {arch} image")))
        }
    };
    let arm64 = image("arm64").await?;
    let x86_64 = image("x86_64").await?;
    let vpc = ec2.create_vpc().cidr_block("10.41.0.0/16").send().await?;
    let vpc_id = vpc
        .vpc()
        .and_then(|v| v.vpc_id())
        .ok_or("no vpc id")?
        .to_owned();
    let subnet = ec2
        .create_subnet()
        .vpc_id(&vpc_id)
        .cidr_block("10.41.1.0/24")
        .availability_zone("us-east-1a")
        .send()
        .await?;
    let subnet_id = subnet
        .subnet()
        .and_then(|s| s.subnet_id())
        .ok_or("no subnet id")?
        .to_owned();
    let group = ec2
        .create_security_group()
        .group_name(format!("floe-nodes-{run}"))
        .description("Elasticsearch nodes")
        .vpc_id(&vpc_id)
        .send()
        .await?;
    let group_id = group.group_id().ok_or("no group id")?.to_owned();
    let key = aws_sdk_kms::Client::new(sdk).create_key().send().await?;
    let key_arn = key
        .key_metadata()
        .and_then(|k| k.arn())
        .ok_or("no key arn")?
        .to_owned();
    let boundary = format!("arn:aws:iam::{ACCOUNT}:policy/floe-node-boundary-{run}");
    let vars = vec![
        ("FLOE_STORE", format!("dynamodb://floe-identity-{run}")),
        ("FLOE_CREATE_TABLE", "true".to_owned()),
        // The test runs its own engine on a local queue: no message is sent.
        (
            "FLOE_QUEUE_URL",
            format!("http://127.0.0.1:1/{ACCOUNT}/unused-{run}"),
        ),
        ("AWS_REGION", REGION.to_owned()),
        ("FLOE_KMS_KEY_ID", key_arn),
        ("FLOE_COMPUTE", "ec2".to_owned()),
        ("FLOE_EC2_IMAGE_ARM64", arm64),
        ("FLOE_EC2_IMAGE_X86_64", x86_64),
        ("FLOE_EC2_SUBNETS", subnet_id),
        ("FLOE_EC2_SECURITY_GROUPS", group_id),
        ("FLOE_NODE_PERMISSIONS_BOUNDARY", boundary.clone()),
        ("FLOE_NODE_IAM_PATH", "/floe-nodes/".to_owned()),
    ];
    Ok(Setup { vars, boundary })
}

/// The worker's steps, except that the cluster is taken to have formed.
struct NoClusterContact(Arc<dyn Steps>);

#[async_trait]
impl Steps for NoClusterContact {
    fn layout(&self, plan: &Plan, deployment: &Deployment) -> Result<Vec<String>, StepError> {
        self.0.layout(plan, deployment)
    }
    async fn run(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        if step_id == "wait-joined" || step_id == "license" {
            return Outcome::Done(Value::Null);
        }
        self.0.run(step_id, ctx).await
    }
    async fn undo(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        self.0.undo(step_id, ctx).await
    }
    fn settle(&self, plan: &Plan, next: &mut Deployment) {
        self.0.settle(plan, next);
    }
}

async fn run_to_end(
    store: &Store,
    steps: Arc<dyn Steps>,
    job: &PlanJob,
) -> Result<PlanStatus, Box<dyn Error>> {
    let (queue, mut rx) = LocalQueue::new();
    let engine = Engine::new(
        store.clone(),
        Arc::new(queue),
        steps,
        "identity-test",
        EngineConfig {
            backoff: Duration::from_millis(1),
            ..EngineConfig::default()
        },
    );
    let mut result = engine.run(job).await?;
    for _ in 0..500 {
        if let RunResult::Finished(status) = result {
            return Ok(status);
        }
        let next = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await?
            .ok_or("queue closed")?;
        result = engine.run(&next).await?;
    }
    Err("the plan did not finish".into())
}

fn spec() -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(json!({
        "name": "logs",
        "version": "8.15.3",
        "node_groups": [{
            "id": "hot",
            "roles": ["master", "data_hot", "data_content"],
            "instance_type": "m6g.xlarge",
            "count": 1,
            "zone_count": 1,
            "storage": {"size_gb": 100}
        }]
    }))
}

/// A deployment with its pending create plan, as the API writes them.
async fn new_create(store: &Store) -> Result<PlanJob, Box<dyn Error>> {
    let now = Utc::now();
    let spec = spec()?;
    let plan = Plan::new(
        ORG,
        &floe_domain::names::new_resource_id(),
        PlanParams::Create(spec.clone()),
        "test",
        "tester",
        now,
    );
    let deployment = Deployment {
        last_drill: None,
        id: plan.deployment_id.clone(),
        org: ORG.into(),
        spec,
        status: DeploymentStatus::Initializing,
        pending_plan: Some(plan.reference()),
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
    store.create_deployment(&deployment, &plan, None).await?;
    Ok(PlanJob {
        org: ORG.into(),
        deployment_id: deployment.id,
        plan_id: plan.id,
    })
}

/// What DELETE does: the deployment stopping, with a pending delete plan.
async fn new_delete(store: &Store, id: &str) -> Result<PlanJob, Box<dyn Error>> {
    let current = store
        .get_deployment(ORG, id)
        .await?
        .ok_or("no deployment")?;
    let plan = Plan::new(ORG, id, PlanParams::Delete, "test", "tester", Utc::now());
    let mut next = current.value.clone();
    next.status = DeploymentStatus::Stopping;
    next.pending_plan = Some(plan.reference());
    store
        .replace_deployment(&next, &current, Some(&plan))
        .await?;
    Ok(PlanJob {
        org: ORG.into(),
        deployment_id: id.to_owned(),
        plan_id: plan.id,
    })
}

/// The role's inline policy, decoded (IAM answers it URL-encoded).
async fn node_policy(iam: &aws_sdk_iam::Client, role: &str) -> Result<Value, Box<dyn Error>> {
    let out = iam
        .get_role_policy()
        .role_name(role)
        .policy_name(floe_identity_iam::POLICY_NAME)
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

/// The deployment's launch templates (by its tag), each with the instance
/// profile its latest version names.
async fn templates(
    ec2: &aws_sdk_ec2::Client,
    id: &str,
) -> Result<Vec<(String, Option<String>)>, Box<dyn Error>> {
    let listed = ec2
        .describe_launch_templates()
        .filters(
            Filter::builder()
                .name(format!("tag:{TAG_DEPLOYMENT}"))
                .values(id)
                .build(),
        )
        .send()
        .await?;
    let mut out = Vec::new();
    for template in listed.launch_templates() {
        let name = template.launch_template_name().ok_or("no name")?.to_owned();
        let versions = ec2
            .describe_launch_template_versions()
            .launch_template_name(&name)
            .versions("$Latest")
            .send()
            .await?;
        let profile = versions
            .launch_template_versions()
            .first()
            .and_then(|v| v.launch_template_data())
            .and_then(|d| d.iam_instance_profile())
            .and_then(|p| p.arn().or(p.name()))
            .map(str::to_owned);
        out.push((name, profile));
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_deployment_gets_its_own_node_identity_and_a_delete_removes_it() -> TestResult {
    let endpoint = endpoint()?;
    let sdk = sdk(&endpoint);
    let setup = setup(&sdk).await?;
    let vars: Vec<(&str, &str)> = setup.vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let config = WorkerConfig::read(&Env::from_pairs(&vars))?;
    let adapters = Adapters::with_sdk(&config, &sdk).await?;
    let steps: Arc<dyn Steps> = Arc::new(NoClusterContact(adapters.steps.clone()));
    let store = adapters.store.clone();
    let iam = aws_sdk_iam::Client::new(&sdk);
    let ec2 = aws_sdk_ec2::Client::new(&sdk);

    let create = new_create(&store).await?;
    let other = new_create(&store).await?;
    assert_eq!(
        run_to_end(&store, steps.clone(), &create).await?,
        PlanStatus::Succeeded
    );
    assert_eq!(
        run_to_end(&store, steps.clone(), &other).await?,
        PlanStatus::Succeeded
    );
    let id = create.deployment_id.clone();
    let name = node_identity_name(&id);

    // The role: under the node path, bounded, trusted by EC2 only.
    let role = iam.get_role().role_name(&name).send().await?;
    let role = role.role().ok_or("no role")?;
    assert_eq!(role.path(), "/floe-nodes/");
    assert_eq!(
        role.permissions_boundary()
            .and_then(|b| b.permissions_boundary_arn()),
        Some(setup.boundary.as_str())
    );
    // Its policy reads this deployment's parameters and no one else's.
    let policy = node_policy(&iam, &name).await?;
    let text = policy.to_string();
    let own = format!("arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/floe/{id}/*");
    assert_eq!(text.matches("parameter/").count(), 1, "{text}");
    assert!(!text.contains(&other.deployment_id), "{text}");
    let mut reads = 0;
    for statement in policy["Statement"].as_array().ok_or("no statements")? {
        if statement["Action"].to_string().contains("ssm:") {
            reads += 1;
            assert_eq!(statement["Resource"], json!(own), "{text}");
        }
    }
    assert_eq!(reads, 1, "{text}");

    // The profile holds that role, and the launch template names it.
    let profile = iam
        .get_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await?;
    let profile = profile.instance_profile().ok_or("no profile")?;
    let roles: Vec<&str> = profile.roles().iter().map(|r| r.role_name()).collect();
    assert_eq!(roles, [name.as_str()]);
    let profile_arn = profile.arn().to_owned();
    let made = templates(&ec2, &id).await?;
    assert!(!made.is_empty(), "no launch template for {id}");
    for (template, named) in &made {
        assert_eq!(
            named.as_deref(),
            Some(profile_arn.as_str()),
            "{template} launches with another profile"
        );
    }
    let theirs = templates(&ec2, &other.deployment_id).await?;
    assert!(
        theirs
            .iter()
            .all(|(_, p)| p.as_deref() != Some(profile_arn.as_str())),
        "another deployment's nodes share the profile: {theirs:?}"
    );

    // The delete takes role, policy and profile with it, and leaves the
    // other deployment's.
    let delete = new_delete(&store, &id).await?;
    assert_eq!(
        run_to_end(&store, steps.clone(), &delete).await?,
        PlanStatus::Succeeded
    );
    assert!(store.get_deployment(ORG, &id).await?.is_none());
    assert!(
        iam.get_role().role_name(&name).send().await.is_err(),
        "the role is left"
    );
    assert!(
        iam.get_role_policy()
            .role_name(&name)
            .policy_name(floe_identity_iam::POLICY_NAME)
            .send()
            .await
            .is_err(),
        "the policy is left"
    );
    assert!(
        iam.get_instance_profile()
            .instance_profile_name(&name)
            .send()
            .await
            .is_err(),
        "the instance profile is left"
    );
    assert!(templates(&ec2, &id).await?.is_empty(), "templates are left");
    iam.get_role()
        .role_name(node_identity_name(&other.deployment_id))
        .send()
        .await?;

    let delete_other = new_delete(&store, &other.deployment_id).await?;
    assert_eq!(
        run_to_end(&store, steps, &delete_other).await?,
        PlanStatus::Succeeded
    );
    Ok(())
}
