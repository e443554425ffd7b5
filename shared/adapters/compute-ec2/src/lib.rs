//! The EC2 adapter of Floe's compute port: one launch template per node group,
//! instances started from it in the zone's subnet, found again by tag.
//!
//! This is the only crate that links `aws-sdk-ec2`, so that nothing else in
//! the workspace pays its build time; the worker links it, the API does not.
//!
//! Every operation is safe to run again after a crash or a retry: templates
//! are ensured by name, launches are idempotent on the request's client token,
//! deletes and terminations of what is already gone succeed.

mod error;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{
    Filter, InstanceStateName, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataEndpointState, LaunchTemplateInstanceMetadataOptionsRequest,
    LaunchTemplateSpecification, LaunchTemplateTagSpecificationRequest, RequestLaunchTemplateData,
    ResourceType, Tag, TagSpecification,
};
use base64::Engine as _;
use floe_compute::{
    CheckStatus, Compute, ComputeError, Instance, InstanceState, LaunchRequest, LaunchTemplateSpec,
    ScheduledEvent, StatusChecks, TAG_DEPLOYMENT,
};
use floe_domain::catalog::{self, Arch};
use floe_domain::deployment::VolumeType;

use crate::error::{Ec2Failure, permanent};

/// Every EC2 API operation this crate calls, and no other. The deploy
/// template's IAM policy is checked against it.
pub const EC2_OPERATIONS: &[&str] = &[
    "CreateLaunchTemplate",
    "DeleteLaunchTemplate",
    "DescribeImages",
    "DescribeInstanceStatus",
    "DescribeInstances",
    "DescribeLaunchTemplates",
    "RunInstances",
    "TerminateInstances",
];

/// The IAM actions the worker's role needs for this crate: the operations
/// above, plus two EC2 authorises without a call of their own. Tagging
/// resources while creating them needs `ec2:CreateTags`, and starting an
/// instance with an instance profile needs `iam:PassRole` on its role.
pub const IAM_ACTIONS: &[&str] = &[
    "ec2:CreateLaunchTemplate",
    "ec2:DeleteLaunchTemplate",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceStatus",
    "ec2:DescribeInstances",
    "ec2:DescribeLaunchTemplates",
    "ec2:RunInstances",
    "ec2:TerminateInstances",
    "ec2:CreateTags",
    "iam:PassRole",
];

/// Tag carrying the client token of the launch that started an instance.
/// EC2 honours `ClientToken` itself; the tag lets the adapter find a launch's
/// instances again where it does not (moto ignores the token).
pub const TAG_CLIENT_TOKEN: &str = "floe:client-token";

/// Device name of the Elasticsearch data volume. The root volume stays the
/// image's own, so that data survives a replaced OS disk and the boot script
/// can find the data disk (on Nitro types it shows up as an NVMe device whose
/// serial is the volume id; Amazon Linux also links it under this name).
pub const DATA_VOLUME_DEVICE: &str = "/dev/sdf";

/// EC2 refuses user data above 16 KiB before encoding; checking here turns
/// that into a clear failure without a call.
const MAX_USER_DATA_BYTES: usize = 16 * 1024;

/// EC2's limit on `ClientToken`.
const MAX_CLIENT_TOKEN_LEN: usize = 64;

/// A filter accepts at most 200 values (the port counts a listing's calls
/// by the same figure).
const MAX_FILTER_VALUES: usize = floe_compute::DEPLOYMENTS_PER_LISTING;

/// The largest page DescribeInstances serves.
const DESCRIBE_PAGE_SIZE: i32 = floe_compute::INSTANCES_PER_PAGE as i32;

/// The largest page DescribeLaunchTemplates serves.
const TEMPLATE_PAGE_SIZE: i32 = 200;

const TEMPLATE_EXISTS: &str = "InvalidLaunchTemplateName.AlreadyExistsException";

/// Where and how the node groups' instances run; read from the deployment's
/// configuration once per cold start.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ec2Config {
    /// AMI id per architecture (arm64 for Graviton, x86_64).
    pub image_arm64: String,
    pub image_x86_64: String,
    /// One subnet per zone; `LaunchRequest.zone` indexes it (modulo its length).
    pub subnets: Vec<String>,
    pub security_groups: Vec<String>,
    /// Instance profile ARN or name for the Elasticsearch nodes.
    pub instance_profile: Option<String>,
    pub key_name: Option<String>,
}

#[derive(Debug)]
pub struct Ec2Compute {
    client: Client,
    config: Ec2Config,
    /// The architecture EC2 reports per image id. An AMI never changes its
    /// architecture, so one DescribeImages per image and process is enough.
    image_arches: Mutex<HashMap<String, String>>,
}

impl Ec2Compute {
    /// Builds the client from the process's shared SDK configuration
    /// (`AWS_REGION`, the Lambda role's credentials, `AWS_ENDPOINT_URL`...).
    pub fn new(sdk: &aws_config::SdkConfig, config: Ec2Config) -> Ec2Compute {
        Ec2Compute {
            client: Client::new(sdk),
            config,
            image_arches: Mutex::new(HashMap::new()),
        }
    }

    pub fn config(&self) -> &Ec2Config {
        &self.config
    }

    fn image_for(&self, arch: Arch) -> &str {
        match arch {
            Arch::Arm64 => &self.config.image_arm64,
            Arch::X86_64 => &self.config.image_x86_64,
        }
    }

    /// The configured image for `arch`, once EC2 has confirmed it is built
    /// for that architecture: EC2 itself would start an x86 image on a
    /// Graviton type and leave a node that never boots.
    async fn checked_image(&self, arch: Arch) -> Result<&str, ComputeError> {
        let image = self.image_for(arch);
        if image.is_empty() {
            return Err(permanent(
                "invalid_configuration",
                format!("no image is configured for {arch}"),
            ));
        }
        let cached = self.cached_arch(image);
        let actual = match cached {
            Some(actual) => actual,
            None => {
                let out = self
                    .client
                    .describe_images()
                    .image_ids(image)
                    .send()
                    .await
                    .map_err(|err| {
                        Ec2Failure::from_sdk("DescribeImages", &err).into_compute_error(None)
                    })?;
                let found = out
                    .images()
                    .iter()
                    .find(|i| i.image_id() == Some(image))
                    .ok_or_else(|| {
                        permanent(
                            "invalid_image",
                            format!("image {image} (for {arch}) does not exist"),
                        )
                    })?;
                let actual = found
                    .architecture()
                    .map(|a| a.as_str().to_owned())
                    .unwrap_or_default();
                self.remember_arch(image, &actual);
                actual
            }
        };
        if actual != arch.as_str() {
            return Err(permanent(
                "image_architecture_mismatch",
                format!("image {image} is built for {actual:?}, but it is configured for {arch}"),
            ));
        }
        Ok(image)
    }

    fn cached_arch(&self, image: &str) -> Option<String> {
        // A poisoned lock only means another task panicked mid-insert of a
        // plain string; the map is still usable.
        let map = self.image_arches.lock().unwrap_or_else(|e| e.into_inner());
        map.get(image).cloned()
    }

    fn remember_arch(&self, image: &str, arch: &str) {
        let mut map = self.image_arches.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(image.to_owned(), arch.to_owned());
    }

    fn template_data(
        &self,
        spec: &LaunchTemplateSpec,
        image: &str,
    ) -> Result<RequestLaunchTemplateData, ComputeError> {
        let volume = &spec.volume;
        let ebs = LaunchTemplateEbsBlockDeviceRequest::builder()
            .volume_size(to_i32("volume size", volume.size_gb)?)
            .volume_type(volume_type(volume.volume_type))
            .set_iops(volume.iops.map(|v| to_i32("iops", v)).transpose()?)
            .set_throughput(
                volume
                    .throughput
                    .map(|v| to_i32("throughput", v))
                    .transpose()?,
            )
            .encrypted(true)
            .delete_on_termination(true)
            .build();
        let mut data = RequestLaunchTemplateData::builder()
            .image_id(image)
            .instance_type(spec.instance_type.as_str().into())
            .user_data(base64::engine::general_purpose::STANDARD.encode(&spec.user_data))
            .block_device_mappings(
                LaunchTemplateBlockDeviceMappingRequest::builder()
                    .device_name(DATA_VOLUME_DEVICE)
                    .ebs(ebs)
                    .build(),
            )
            // IMDSv2 only: a token-less metadata request (the classic SSRF
            // path to the node's credentials) is refused.
            .metadata_options(
                LaunchTemplateInstanceMetadataOptionsRequest::builder()
                    .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::Enabled)
                    .http_tokens(LaunchTemplateHttpTokensState::Required)
                    .build(),
            )
            .set_security_group_ids(
                (!self.config.security_groups.is_empty())
                    .then(|| self.config.security_groups.clone()),
            )
            .set_key_name(self.config.key_name.clone());
        // The deployment's own identity when the plan made one, else the
        // configured profile.
        let profile = spec
            .instance_profile
            .as_ref()
            .or(self.config.instance_profile.as_ref());
        if let Some(profile) = profile {
            let profile_spec = LaunchTemplateIamInstanceProfileSpecificationRequest::builder();
            let profile_spec = if profile.starts_with("arn:") {
                profile_spec.arn(profile)
            } else {
                profile_spec.name(profile)
            };
            data = data.iam_instance_profile(profile_spec.build());
        }
        if !spec.tags.is_empty() {
            for resource in [ResourceType::Instance, ResourceType::Volume] {
                data = data.tag_specifications(
                    LaunchTemplateTagSpecificationRequest::builder()
                        .resource_type(resource)
                        .set_tags(Some(tags(&spec.tags)))
                        .build(),
                );
            }
        }
        Ok(data.build())
    }

    /// The id of the template with this name, or `None` if there is none.
    async fn template_id(&self, name: &str) -> Result<Option<String>, ComputeError> {
        match self
            .client
            .describe_launch_templates()
            .launch_template_names(name)
            .send()
            .await
        {
            Ok(out) => Ok(out
                .launch_templates()
                .iter()
                .find(|t| t.launch_template_name() == Some(name))
                .and_then(|t| t.launch_template_id())
                .map(str::to_owned)),
            Err(err) => {
                let failure = Ec2Failure::from_sdk("DescribeLaunchTemplates", &err);
                if template_not_found(failure.code()) {
                    Ok(None)
                } else {
                    Err(failure.into_compute_error(None))
                }
            }
        }
    }

    /// Instances matching all the filters, across every page.
    async fn describe(
        &self,
        filters: Vec<Filter>,
    ) -> Result<Vec<aws_sdk_ec2::types::Instance>, ComputeError> {
        let mut pages = self
            .client
            .describe_instances()
            .set_filters(Some(filters))
            .max_results(DESCRIBE_PAGE_SIZE)
            .into_paginator()
            .send();
        let mut found = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|err| {
                Ec2Failure::from_sdk("DescribeInstances", &err).into_compute_error(None)
            })?;
            for reservation in page.reservations() {
                found.extend(reservation.instances().iter().cloned());
            }
        }
        Ok(found)
    }

    /// The ids of the instances an earlier launch with this token started,
    /// in launch order.
    async fn launched_with(&self, client_token: &str) -> Result<Vec<String>, ComputeError> {
        let mut found: Vec<(i32, String)> = self
            .describe(vec![tag_filter(TAG_CLIENT_TOKEN, client_token)])
            .await?
            .iter()
            .filter_map(|i| {
                Some((
                    i.ami_launch_index().unwrap_or(0),
                    i.instance_id()?.to_owned(),
                ))
            })
            .collect();
        found.sort();
        Ok(found.into_iter().map(|(_, id)| id).collect())
    }

    /// Of these ids, those EC2 knows and that are not terminated yet.
    async fn live_ids(&self, ids: &[&str]) -> Result<Vec<String>, ComputeError> {
        let mut live = Vec::new();
        for chunk in ids.chunks(MAX_FILTER_VALUES) {
            let filter = Filter::builder()
                .name("instance-id")
                .set_values(Some(chunk.iter().map(|id| (*id).to_owned()).collect()))
                .build();
            for instance in self.describe(vec![filter]).await? {
                let terminated =
                    instance.state().and_then(|s| s.name()) == Some(&InstanceStateName::Terminated);
                if let (Some(id), false) = (instance.instance_id(), terminated) {
                    live.push(id.to_owned());
                }
            }
        }
        Ok(live)
    }

    async fn terminate_ids(&self, ids: &[&str]) -> Result<(), Ec2Failure> {
        self.client
            .terminate_instances()
            .set_instance_ids(Some(ids.iter().map(|id| (*id).to_owned()).collect()))
            .send()
            .await
            .map(|_| ())
            .map_err(|err| Ec2Failure::from_sdk("TerminateInstances", &err))
    }
}

#[async_trait]
impl Compute for Ec2Compute {
    async fn ensure_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<String, ComputeError> {
        let known = catalog::lookup(&spec.instance_type).ok_or_else(|| {
            permanent(
                "architecture_mismatch",
                format!(
                    "instance type {} is not in Floe's catalog, so its architecture is unknown",
                    spec.instance_type
                ),
            )
        })?;
        if known.arch != spec.arch {
            return Err(permanent(
                "architecture_mismatch",
                format!(
                    "instance type {} is {}, but the template asks for {}",
                    spec.instance_type, known.arch, spec.arch
                ),
            ));
        }
        if spec.user_data.len() > MAX_USER_DATA_BYTES {
            return Err(permanent(
                "invalid_configuration",
                format!(
                    "user data is {} bytes; EC2 accepts at most {MAX_USER_DATA_BYTES}",
                    spec.user_data.len()
                ),
            ));
        }
        let image = self.checked_image(spec.arch).await?;
        let data = self.template_data(spec, image)?;
        let template_tags = (!spec.tags.is_empty()).then(|| {
            vec![
                TagSpecification::builder()
                    .resource_type(ResourceType::LaunchTemplate)
                    .set_tags(Some(tags(&spec.tags)))
                    .build(),
            ]
        });
        let created = self
            .client
            .create_launch_template()
            .launch_template_name(&spec.name)
            .launch_template_data(data)
            .set_tag_specifications(template_tags)
            .send()
            .await;
        match created {
            Ok(out) => {
                if let Some(id) = out.launch_template().and_then(|t| t.launch_template_id()) {
                    tracing::info!(template = %spec.name, id, "created launch template");
                    return Ok(id.to_owned());
                }
            }
            Err(err) => {
                let failure = Ec2Failure::from_sdk("CreateLaunchTemplate", &err);
                if failure.code() != Some(TEMPLATE_EXISTS) {
                    return Err(failure.into_compute_error(None));
                }
            }
        }
        // It exists (created by an earlier run of this step), or EC2 did not
        // say its id: either way the name leads to it.
        match self.template_id(&spec.name).await? {
            Some(id) => Ok(id),
            None => Err(ComputeError::Transient {
                code: "launch_template_not_visible".to_owned(),
                message: format!(
                    "launch template {} exists but is not listed yet (eventual consistency, or deleted meanwhile)",
                    spec.name
                ),
            }),
        }
    }

    async fn delete_launch_template(&self, name: &str) -> Result<(), ComputeError> {
        // Deleting by name would be one call, but moto answers an unknown
        // name with `MissingParameter` instead of EC2's NotFound; the
        // lookup gives one well-defined "gone" on both, and deleting by id
        // then cannot hit a namesake created in between.
        let Some(id) = self.template_id(name).await? else {
            return Ok(());
        };
        match self
            .client
            .delete_launch_template()
            .launch_template_id(&id)
            .send()
            .await
        {
            Ok(_) => {
                tracing::info!(template = %name, id, "deleted launch template");
                Ok(())
            }
            Err(err) => {
                let failure = Ec2Failure::from_sdk("DeleteLaunchTemplate", &err);
                if template_not_found(failure.code()) {
                    Ok(())
                } else {
                    Err(failure.into_compute_error(None))
                }
            }
        }
    }

    async fn launch_templates(&self, deployment_id: &str) -> Result<Vec<String>, ComputeError> {
        // Filtered on the server by the deployment's tag, every page: an
        // unfiltered listing of a busy account is long (and moto cuts it).
        let mut pages = self
            .client
            .describe_launch_templates()
            .filters(tag_filter(TAG_DEPLOYMENT, deployment_id))
            .max_results(TEMPLATE_PAGE_SIZE)
            .into_paginator()
            .send();
        let mut names = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|err| {
                Ec2Failure::from_sdk("DescribeLaunchTemplates", &err).into_compute_error(None)
            })?;
            names.extend(
                page.launch_templates()
                    .iter()
                    .filter_map(|t| t.launch_template_name().map(str::to_owned)),
            );
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Vec<String>, ComputeError> {
        if request.count == 0 {
            return Ok(Vec::new());
        }
        let token = request.client_token.as_str();
        if token.is_empty() || token.len() > MAX_CLIENT_TOKEN_LEN || !token.is_ascii() {
            // Without a usable token a retried launch would start a second
            // set of instances.
            return Err(permanent(
                "invalid_request",
                format!("the client token must be 1 to {MAX_CLIENT_TOKEN_LEN} ASCII characters"),
            ));
        }
        let count = to_i32("instance count", request.count)?;
        let subnets = &self.config.subnets;
        let subnet = subnets
            .get(request.zone.checked_rem(subnets.len()).unwrap_or(0))
            .ok_or_else(|| {
                permanent(
                    "invalid_configuration",
                    "no subnet is configured".to_owned(),
                )
            })?;

        // EC2 answers a repeated token with the first launch's instances by
        // itself; looking them up by tag first also covers an endpoint that
        // ignores the token (moto) and a retry after EC2 forgot it.
        let earlier = self.launched_with(token).await?;
        if !earlier.is_empty() {
            tracing::info!(token, ids = ?earlier, "launch already done");
            return Ok(earlier);
        }

        let mut instance_tags = request.tags.clone();
        instance_tags.insert(TAG_CLIENT_TOKEN.to_owned(), token.to_owned());
        let launched = self
            .client
            .run_instances()
            .launch_template(
                LaunchTemplateSpecification::builder()
                    .launch_template_name(&request.template_name)
                    .version("$Default")
                    .build(),
            )
            .min_count(count)
            .max_count(count)
            .subnet_id(subnet)
            .client_token(token)
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::Instance)
                    .set_tags(Some(tags(&instance_tags)))
                    .build(),
            )
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::Volume)
                    .set_tags(Some(tags(&instance_tags)))
                    .build(),
            )
            .send()
            .await
            .map_err(|err| {
                let failure = Ec2Failure::from_sdk("RunInstances", &err);
                if template_not_found(failure.code()) || failure.is_profile_not_ready() {
                    // The template step ran before this one; EC2 may just
                    // not show it everywhere yet. Likewise a deployment's
                    // instance profile: IAM is eventually consistent, and
                    // EC2 refuses one made seconds ago for a while.
                    failure.into_transient()
                } else {
                    failure.into_compute_error(Some(request.zone))
                }
            })?;
        let ids: Vec<String> = launched
            .instances()
            .iter()
            .filter_map(|i| i.instance_id().map(str::to_owned))
            .collect();
        tracing::info!(template = %request.template_name, subnet, ids = ?ids, "launched instances");
        Ok(ids)
    }

    async fn instances(&self, deployment_id: &str) -> Result<Vec<Instance>, ComputeError> {
        let found = self
            .describe(vec![tag_filter(TAG_DEPLOYMENT, deployment_id)])
            .await?;
        Ok(found.iter().filter_map(to_instance).collect())
    }

    async fn instances_of(
        &self,
        deployment_ids: &[String],
    ) -> Result<BTreeMap<String, Vec<Instance>>, ComputeError> {
        let mut found: BTreeMap<String, Vec<Instance>> = deployment_ids
            .iter()
            .map(|id| (id.clone(), Vec::new()))
            .collect();
        let wanted: Vec<&String> = found.keys().filter(|id| !id.is_empty()).collect();
        let mut listed = Vec::new();
        for chunk in wanted.chunks(MAX_FILTER_VALUES) {
            let filter = Filter::builder()
                .name(format!("tag:{TAG_DEPLOYMENT}"))
                .set_values(Some(
                    chunk.iter().map(|id| escape_filter_value(id)).collect(),
                ))
                .build();
            listed.extend(self.describe(vec![filter]).await?);
        }
        for instance in listed.iter().filter_map(to_instance) {
            // The filter matches wildcards EC2's way; only the exact tag
            // value places an instance.
            if let Some(list) = instance
                .tags
                .get(TAG_DEPLOYMENT)
                .cloned()
                .and_then(|d| found.get_mut(&d))
            {
                list.push(instance);
            }
        }
        Ok(found)
    }

    async fn instance(&self, id: &str) -> Result<Option<Instance>, ComputeError> {
        // By filter, not by id: an unknown id is then no instance rather
        // than an InvalidInstanceID error.
        let found = self
            .describe(vec![
                Filter::builder().name("instance-id").values(id).build(),
            ])
            .await?;
        Ok(found.iter().filter_map(to_instance).find(|i| i.id == id))
    }

    async fn terminate(&self, ids: &[String]) -> Result<(), ComputeError> {
        let mut seen = HashSet::new();
        let ids: Vec<&str> = ids
            .iter()
            .map(String::as_str)
            .filter(|id| !id.is_empty() && seen.insert(*id))
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let failure = match self.terminate_ids(&ids).await {
            Ok(()) => return Ok(()),
            Err(failure) => failure,
        };
        if !instance_not_found(failure.code()) {
            return Err(failure.into_compute_error(None));
        }
        // One unknown id fails the whole call and terminates nothing; the
        // rest still have to go.
        let live = self.live_ids(&ids).await?;
        if live.is_empty() {
            return Ok(());
        }
        let live: Vec<&str> = live.iter().map(String::as_str).collect();
        match self.terminate_ids(&live).await {
            Ok(()) => Ok(()),
            Err(failure) if instance_not_found(failure.code()) => Ok(()),
            Err(failure) => Err(failure.into_compute_error(None)),
        }
    }

    async fn status_checks(&self, ids: &[String]) -> Result<Vec<StatusChecks>, ComputeError> {
        let mut seen = HashSet::new();
        let ids: Vec<String> = ids
            .iter()
            .filter(|id| !id.is_empty() && seen.insert(id.as_str()))
            .cloned()
            .collect();
        let mut found = Vec::new();
        for chunk in ids.chunks(floe_compute::STATUS_IDS_PER_CALL) {
            // Without `IncludeAllInstances` EC2 answers for running
            // instances only, which are the ones status checks judge.
            let out = self
                .client
                .describe_instance_status()
                .set_instance_ids(Some(chunk.to_vec()))
                .send()
                .await
                .map_err(|err| {
                    let failure = Ec2Failure::from_sdk("DescribeInstanceStatus", &err);
                    if instance_not_found(failure.code()) {
                        // An id listed a moment ago that EC2 does not show
                        // yet (or any more): the next check asks again.
                        failure.into_transient()
                    } else {
                        failure.into_compute_error(None)
                    }
                })?;
            found.extend(out.instance_statuses().iter().filter_map(to_status_checks));
        }
        Ok(found)
    }
}

/// The checks EC2 reports for one instance. A check EC2 leaves out (it
/// reports none for an instance that is not running, and the attached EBS
/// check only on Nitro instances; moto reports none of it) judges nothing.
fn to_status_checks(status: &aws_sdk_ec2::types::InstanceStatus) -> Option<StatusChecks> {
    let check = |summary: Option<&aws_sdk_ec2::types::InstanceStatusSummary>| {
        summary
            .and_then(|s| s.status())
            .map(check_status)
            .unwrap_or(CheckStatus::InsufficientData)
    };
    Some(StatusChecks {
        id: status.instance_id()?.to_owned(),
        system: check(status.system_status()),
        instance: check(status.instance_status()),
        attached_ebs: status
            .attached_ebs_status()
            .and_then(|s| s.status())
            .map(check_status)
            .unwrap_or(CheckStatus::InsufficientData),
        scheduled_events: status.events().iter().filter_map(scheduled_event).collect(),
    })
}

/// One of EC2's scheduled events for an instance; one without a code (which
/// EC2 always gives) is no event to report.
fn scheduled_event(event: &aws_sdk_ec2::types::InstanceStatusEvent) -> Option<ScheduledEvent> {
    let time = |t: Option<&aws_sdk_ec2::primitives::DateTime>| {
        t.and_then(|t| t.to_millis().ok())
            .and_then(chrono::DateTime::from_timestamp_millis)
    };
    Some(ScheduledEvent {
        code: event.code()?.as_str().to_string(),
        description: event.description().unwrap_or_default().to_string(),
        not_before: time(event.not_before()),
        not_after: time(event.not_after()),
    })
}

fn check_status(status: &aws_sdk_ec2::types::SummaryStatus) -> CheckStatus {
    use aws_sdk_ec2::types::SummaryStatus as S;
    match status {
        S::Ok => CheckStatus::Ok,
        S::Impaired => CheckStatus::Impaired,
        S::Initializing => CheckStatus::Initializing,
        S::InsufficientData => CheckStatus::InsufficientData,
        S::NotApplicable => CheckStatus::NotApplicable,
        // A value this SDK does not know is no verdict: replacing a node
        // takes a failing check, never a guess.
        _ => CheckStatus::InsufficientData,
    }
}

fn to_i32(what: &str, value: u32) -> Result<i32, ComputeError> {
    i32::try_from(value).map_err(|_| {
        permanent(
            "invalid_configuration",
            format!("{what} {value} is out of range"),
        )
    })
}

fn template_not_found(code: Option<&str>) -> bool {
    matches!(
        code,
        Some("InvalidLaunchTemplateName.NotFoundException" | "InvalidLaunchTemplateId.NotFound")
    )
}

fn instance_not_found(code: Option<&str>) -> bool {
    matches!(
        code,
        Some("InvalidInstanceID.NotFound" | "InvalidInstanceID.Malformed")
    )
}

fn volume_type(volume_type: VolumeType) -> aws_sdk_ec2::types::VolumeType {
    use aws_sdk_ec2::types::VolumeType as Ec2;
    match volume_type {
        VolumeType::Gp3 => Ec2::Gp3,
        VolumeType::Gp2 => Ec2::Gp2,
        VolumeType::Io1 => Ec2::Io1,
        VolumeType::Io2 => Ec2::Io2,
    }
}

fn tags(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter()
        .map(|(key, value)| Tag::builder().key(key).value(value).build())
        .collect()
}

/// Matches the tag's value exactly: EC2 reads `*` and `?` in filter values
/// as wildcards, so a token or id containing one is escaped.
fn tag_filter(key: &str, value: &str) -> Filter {
    Filter::builder()
        .name(format!("tag:{key}"))
        .values(escape_filter_value(value))
        .build()
}

fn escape_filter_value(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | '*' | '?') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

fn to_instance(instance: &aws_sdk_ec2::types::Instance) -> Option<Instance> {
    let id = instance.instance_id()?;
    Some(Instance {
        id: id.to_owned(),
        state: instance_state(instance),
        instance_type: instance
            .instance_type()
            .map(|t| t.as_str().to_owned())
            .unwrap_or_default(),
        zone: instance
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default()
            .to_owned(),
        private_ip: instance.private_ip_address().map(str::to_owned),
        tags: instance
            .tags()
            .iter()
            .filter_map(|t| {
                Some((
                    t.key()?.to_owned(),
                    t.value().unwrap_or_default().to_owned(),
                ))
            })
            .collect(),
    })
}

fn instance_state(instance: &aws_sdk_ec2::types::Instance) -> InstanceState {
    let state = instance.state();
    match state.and_then(|s| s.name()) {
        Some(InstanceStateName::Pending) => InstanceState::Pending,
        Some(InstanceStateName::Running) => InstanceState::Running,
        Some(InstanceStateName::Stopping) => InstanceState::Stopping,
        Some(InstanceStateName::Stopped) => InstanceState::Stopped,
        Some(InstanceStateName::ShuttingDown) => InstanceState::ShuttingDown,
        Some(InstanceStateName::Terminated) => InstanceState::Terminated,
        // The low byte of the code is the state, documented as stable even
        // where the name is not one this SDK knows.
        _ => match state.and_then(|s| s.code()).map(|c| c & 0xff) {
            Some(16) => InstanceState::Running,
            Some(32) => InstanceState::ShuttingDown,
            Some(48) => InstanceState::Terminated,
            Some(64) => InstanceState::Stopping,
            Some(80) => InstanceState::Stopped,
            // Not known to be usable yet: the plan engine waits on pending.
            _ => InstanceState::Pending,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_values_match_literally() {
        assert_eq!(escape_filter_value("plan-1:hot"), "plan-1:hot");
        assert_eq!(escape_filter_value("a*b?c\\d"), "a\\*b\\?c\\\\d");
    }

    /// moto reports no scheduled events: what EC2 says of one (a
    /// retirement with its window) is read here.
    #[test]
    fn scheduled_events_are_read_with_their_window() {
        use aws_sdk_ec2::types::{EventCode, InstanceStatus, InstanceStatusEvent};
        let status = InstanceStatus::builder()
            .instance_id("i-1")
            .events(
                InstanceStatusEvent::builder()
                    .code(EventCode::InstanceRetirement)
                    .description("The instance is running on degraded hardware")
                    .not_before(aws_sdk_ec2::primitives::DateTime::from_secs(1_800_000_000))
                    .not_after(aws_sdk_ec2::primitives::DateTime::from_secs(1_800_086_400))
                    .build(),
            )
            .build();
        let checks = to_status_checks(&status).expect("checks");
        assert_eq!(
            checks.scheduled_events,
            vec![ScheduledEvent {
                code: "instance-retirement".into(),
                description: "The instance is running on degraded hardware".into(),
                not_before: chrono::DateTime::from_timestamp(1_800_000_000, 0),
                not_after: chrono::DateTime::from_timestamp(1_800_086_400, 0),
            }]
        );
        assert!(checks.scheduled_events[0].pending());
    }

    /// moto reports every running instance's checks as `ok`: what EC2
    /// says of a failing, a starting or an undecided check is read here.
    #[test]
    fn only_a_failing_check_is_impaired() {
        use aws_sdk_ec2::types::{InstanceStatus, InstanceStatusSummary, SummaryStatus};
        let summary = |s: &str| {
            InstanceStatusSummary::builder()
                .status(SummaryStatus::from(s))
                .build()
        };
        let status = |system: Option<&str>, instance: Option<&str>| {
            let status = InstanceStatus::builder()
                .instance_id("i-0123456789abcdef0")
                .set_system_status(system.map(summary))
                .set_instance_status(instance.map(summary))
                .build();
            to_status_checks(&status)
        };
        let ok = status(Some("ok"), Some("ok")).expect("an id");
        assert_eq!((ok.system, ok.instance), (CheckStatus::Ok, CheckStatus::Ok));
        assert!(!ok.impaired());

        let host = status(Some("impaired"), Some("ok")).expect("an id");
        assert!(host.impaired());
        assert_eq!(host.failing(), ["system status check"]);
        let os = status(Some("ok"), Some("impaired")).expect("an id");
        assert_eq!(os.failing(), ["instance status check"]);
        let both = status(Some("impaired"), Some("impaired")).expect("an id");
        assert_eq!(
            both.failing(),
            ["system status check", "instance status check"]
        );

        // Starting, undecided, not applicable, absent or unknown: no verdict.
        for (system, instance) in [
            (Some("initializing"), Some("initializing")),
            (Some("insufficient-data"), Some("insufficient-data")),
            (Some("not-applicable"), Some("not-applicable")),
            (None, None),
            (Some("degraded-someday"), Some("ok")),
        ] {
            let checks = status(system, instance).expect("an id");
            assert!(!checks.impaired(), "{system:?} {instance:?}: {checks:?}");
        }
        let starting = status(Some("initializing"), Some("insufficient-data")).expect("an id");
        assert_eq!(
            (starting.system, starting.instance),
            (CheckStatus::Initializing, CheckStatus::InsufficientData)
        );
        // An answer without an instance id names nothing.
        assert_eq!(to_status_checks(&InstanceStatus::builder().build()), None);
    }

    /// The attached EBS check (a Nitro instance that cannot reach its
    /// volumes): impaired only when EC2 says so; left out, as moto and
    /// older instance types leave it, it judges nothing.
    #[test]
    fn a_failing_attached_ebs_check_is_impaired() {
        use aws_sdk_ec2::types::{
            EbsStatusSummary, InstanceStatus, InstanceStatusSummary, SummaryStatus,
        };
        let ok = || {
            InstanceStatusSummary::builder()
                .status(SummaryStatus::Ok)
                .build()
        };
        let status = |ebs: Option<&str>| {
            let status = InstanceStatus::builder()
                .instance_id("i-0123456789abcdef0")
                .system_status(ok())
                .instance_status(ok())
                .set_attached_ebs_status(ebs.map(|s| {
                    EbsStatusSummary::builder()
                        .status(SummaryStatus::from(s))
                        .build()
                }))
                .build();
            to_status_checks(&status)
        };
        let hung = status(Some("impaired")).expect("an id");
        assert_eq!(hung.attached_ebs, CheckStatus::Impaired);
        assert_eq!(hung.failing(), ["attached EBS status check"]);
        for ebs in [
            Some("ok"),
            Some("initializing"),
            Some("insufficient-data"),
            Some("not-applicable"),
            None,
        ] {
            let checks = status(ebs).expect("an id");
            assert!(!checks.impaired(), "{ebs:?}: {checks:?}");
        }
        assert_eq!(
            status(None).map(|c| c.attached_ebs),
            Some(CheckStatus::InsufficientData)
        );
    }

    #[test]
    fn unknown_state_names_fall_back_on_the_code() {
        let instance = |name: Option<InstanceStateName>, code: i32| {
            aws_sdk_ec2::types::Instance::builder()
                .state(
                    aws_sdk_ec2::types::InstanceState::builder()
                        .set_name(name)
                        .code(code)
                        .build(),
                )
                .build()
        };
        let running = instance(Some(InstanceStateName::Running), 16);
        assert_eq!(instance_state(&running), InstanceState::Running);
        // The high byte is internal to EC2 and ignored.
        let future = instance(Some(InstanceStateName::from("hibernating")), 256 + 80);
        assert_eq!(instance_state(&future), InstanceState::Stopped);
        assert_eq!(instance_state(&instance(None, 7)), InstanceState::Pending);
    }
}
