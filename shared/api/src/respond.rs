//! Typed answers: each sets its status and the headers its kind of
//! resource carries, so a handler says what it answers, not how. Each also
//! documents itself (`utoipa::IntoResponses`): an operation lists its
//! return type in `responses(...)`, so the document's success answers are
//! the ones the handler's type can give, with their headers and examples.

use crate::examples;
use crate::routes::platform::Health;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use floe_app::catalog::InstanceTypeList;
use floe_app::deployments::Creation;
use floe_app::deployments::DeploymentList;
use floe_app::drills::DrillList;
use floe_app::former::{FormerDeploymentList, FormerSnapshotList};
use floe_app::license::LicenseChange;
use floe_app::plans::{DeploymentPlans, PlanView};
use floe_app::policies::PolicyList;
use floe_app::repositories::RepositoryList;
use floe_app::snapshots::SnapshotList;
use floe_app::validation::DeploymentValidation;
use floe_domain::api_key::{ApiKeys, CreatedApiKey};
use floe_domain::deployment::DeploymentView;
use floe_domain::drill::DrillView;
use floe_domain::license::LicenseInfo;
use floe_domain::policy::PolicyView;
use floe_domain::repository::RepositoryView;
use floe_domain::snapshot::SnapshotView;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::response::{Response as DocResponse, ResponseBuilder};
use utoipa::openapi::schema::{Object, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{IntoResponses, ToSchema};

/// A resource that carries its version.
pub trait HasVersion {
    fn version(&self) -> u64;
}

impl HasVersion for DeploymentView {
    fn version(&self) -> u64 {
        self.resource_version
    }
}

impl<T> HasVersion for floe_app::shown::Shown<T> {
    fn version(&self) -> u64 {
        floe_app::shown::Shown::version(self)
    }
}

impl HasVersion for RepositoryView {
    fn version(&self) -> u64 {
        self.resource_version
    }
}

impl HasVersion for PolicyView {
    fn version(&self) -> u64 {
        self.resource_version
    }
}

/// `body` as JSON with `status`, its version as `ETag` and ECE's
/// `x-cloud-resource-version`.
fn versioned_response<T: Serialize + HasVersion>(status: StatusCode, body: T) -> Response {
    let version = body.version();
    let mut r = (status, Json(body)).into_response();
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("\"{version}\"")) {
        h.insert(header::ETAG, v);
    }
    h.insert("x-cloud-resource-version", HeaderValue::from(version));
    r
}

/// A body the API answers with: its schema, what it is in a sentence's
/// words, and an example for the document.
pub trait Documented: ToSchema {
    /// What the body is, as the object of a sentence ("the deployment").
    const WHAT: &'static str;
    fn example() -> Value;
    /// The example of an answer given while the work still runs.
    fn example_running() -> Value {
        Self::example()
    }
}

macro_rules! documented {
    ($($ty:ty => $what:literal, $example:expr $(, running $running:expr)?;)*) => {
        $(impl Documented for $ty {
            const WHAT: &'static str = $what;
            fn example() -> Value {
                $example
            }
            $(fn example_running() -> Value {
                $running
            })?
        })*

        /// The schemas of every documented body, with the schemas they
        /// refer to: answers document themselves by reference, so the
        /// document's components must hold each of them.
        pub fn answer_schemas() -> Vec<(String, RefOr<Schema>)> {
            let mut all = Vec::new();
            $(
                all.push((<$ty as ToSchema>::name().into_owned(), <$ty as utoipa::PartialSchema>::schema()));
                <$ty as ToSchema>::schemas(&mut all);
            )*
            all
        }
    };
}

documented! {
    DeploymentView => "the deployment, with each node group's architecture and JVM heap", examples::deployment_view();
    RepositoryView => "the repository (its secrets show only whether they are set)", examples::repository_view();
    PolicyView => "the policy, with its schedule expression and attachments", examples::policy_view();
    DeploymentList => "one page of deployments, oldest first", json_list("deployments", examples::deployment_view());
    RepositoryList => "one page of repositories, by name", json_list("repositories", examples::repository_view());
    PolicyList => "one page of policies, oldest first", json_list("policies", examples::policy_view());
    SnapshotList => "one page of snapshots, newest first; the first page carries `count`, `latest_status`, `latest_successful_end_time` and `healthy`", examples::snapshot_list();
    SnapshotView => "the snapshot: state, times, indices, shards and size", examples::snapshot(), running examples::running_snapshot();
    FormerDeploymentList => "one page of the deleted deployments whose snapshots the repository keeps, by id", json_list("deployments", examples::former_deployment());
    FormerSnapshotList => "one page of a deleted deployment's kept snapshots, newest first", serde_json::json!({"deployment": examples::former_deployment(), "snapshots": [examples::snapshot()], "next_cursor": null});
    DeploymentPlans => "the plans with their steps: status, timing, attempts, log lines and errors", examples::plans();
    PlanView => "the plan", examples::plans()["pending"].clone();
    DrillView => "the drill: status, snapshot, times, recovery point and time, checks", examples::drill(), running examples::running_drill();
    DrillList => "one page of the deployment's drills, newest first", json_list("drills", examples::drill());
    DeploymentValidation => "what the call would do (nothing was stored): the outcome, the deployment as it would be, and the steps of the plan it would start", examples::deployment_validation();
    InstanceTypeList => "the instance catalog", serde_json::json!({"instance_types": [{"name": "m6g.xlarge", "family": "m6g", "arch": "arm64", "vcpus": 4, "memory_mib": 16384, "jvm_heap_mib": 8192}]});
    Health => "the API's status and version", serde_json::json!({"status": "ok", "version": "0.1.0"});
    LicenseInfo => "the platform license, without its signature", examples::license_info();
    CreatedApiKey => "the new API key with its text, shown this once", examples::created_api_key();
    ApiKeys => "the API keys, oldest first, without their text", serde_json::json!({"keys": [examples::api_key()]});
    LicenseChange => "the license as stored, the license plans it started and the deployments that get it with their next plan", serde_json::json!({"license": examples::license_info(), "plans": [{"deployment_id": examples::DEPLOYMENT_ID, "plan_id": examples::PLAN_ID}], "deferred": []});
}

fn json_list(field: &str, item: Value) -> Value {
    serde_json::json!({ field: [item], "next_cursor": null })
}

fn sentence(what: &str) -> String {
    let mut chars = what.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn header(ty: Type, description: &str) -> utoipa::openapi::Header {
    HeaderBuilder::new()
        .schema(Object::with_type(ty))
        .description(Some(description))
        .build()
}

/// An answer with `T` as its JSON body, by reference to its schema.
fn answer<T: Documented>(description: String, example: Value) -> ResponseBuilder {
    ResponseBuilder::new().description(description).content(
        "application/json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name(T::name())))
            .example(Some(example))
            .build(),
    )
}

/// The same answer with the version headers every versioned body carries.
fn versioned_answer<T: Documented>(description: String, example: Value) -> ResponseBuilder {
    answer::<T>(description, example)
        .header(
            "ETag",
            header(Type::String, "The resource's version, for `If-Match`."),
        )
        .header(
            "x-cloud-resource-version",
            header(Type::Integer, "The resource's version (ECE)."),
        )
}

fn one(status: &str, response: ResponseBuilder) -> BTreeMap<String, RefOr<DocResponse>> {
    BTreeMap::from([(status.to_string(), RefOr::T(response.build()))])
}

/// 200 with the resource's version as `ETag` and ECE's
/// `x-cloud-resource-version`.
pub struct Versioned<T>(pub T);

impl<T: Serialize + HasVersion> IntoResponse for Versioned<T> {
    fn into_response(self) -> Response {
        versioned_response(StatusCode::OK, self.0)
    }
}

impl<T: Documented> IntoResponses for Versioned<T> {
    fn responses() -> BTreeMap<String, RefOr<DocResponse>> {
        one(
            "200",
            versioned_answer::<T>(format!("{}.", sentence(T::WHAT)), T::example()),
        )
    }
}

/// 202 with the resource as it is now, versioned: a plan was recorded and
/// the engine runs it.
pub struct Planned<T>(pub T);

impl<T: Serialize + HasVersion> IntoResponse for Planned<T> {
    fn into_response(self) -> Response {
        versioned_response(StatusCode::ACCEPTED, self.0)
    }
}

impl<T: Documented> IntoResponses for Planned<T> {
    fn responses() -> BTreeMap<String, RefOr<DocResponse>> {
        one(
            "202",
            versioned_answer::<T>(
                format!(
                    "Accepted: a plan is pending and runs in the background (follow it under `…/plans`). The body is {} as it is now.",
                    T::WHAT
                ),
                T::example(),
            ),
        )
    }
}

/// 201 with `Location` and the new resource's version headers.
pub struct Created<T> {
    pub location: String,
    pub body: T,
}

impl<T: Serialize + HasVersion> IntoResponse for Created<T> {
    fn into_response(self) -> Response {
        let mut r = versioned_response(StatusCode::CREATED, self.body);
        if let Ok(v) = HeaderValue::from_str(&self.location) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        r
    }
}

impl<T: Documented> IntoResponses for Created<T> {
    fn responses() -> BTreeMap<String, RefOr<DocResponse>> {
        one(
            "201",
            versioned_answer::<T>(format!("Created: {}.", T::WHAT), T::example())
                .header("Location", header(Type::String, "The new resource's path.")),
        )
    }
}

/// A create (201) or, for a retry or a replace, the existing resource (200).
pub enum CreatedOr<T> {
    Created(Created<T>),
    Existing(Versioned<T>),
}

impl<T: Serialize + HasVersion> IntoResponse for CreatedOr<T> {
    fn into_response(self) -> Response {
        match self {
            CreatedOr::Created(c) => c.into_response(),
            CreatedOr::Existing(v) => v.into_response(),
        }
    }
}

impl<T: Documented> IntoResponses for CreatedOr<T> {
    fn responses() -> BTreeMap<String, RefOr<DocResponse>> {
        let mut all = Created::<T>::responses();
        all.extend(one(
            "200",
            versioned_answer::<T>(
                format!(
                    "Already there (a retry with the same idempotency key and body, or a replace): {}.",
                    T::WHAT
                ),
                T::example(),
            ),
        ));
        all
    }
}

/// 200 with a JSON body that carries no version (a list, a snapshot).
pub struct Plain<T>(pub T);

impl<T: Serialize> IntoResponse for Plain<T> {
    fn into_response(self) -> Response {
        Json(self.0).into_response()
    }
}

impl<T: Documented> IntoResponses for Plain<T> {
    fn responses() -> BTreeMap<String, RefOr<DocResponse>> {
        one(
            "200",
            answer::<T>(format!("{}.", sentence(T::WHAT)), T::example()),
        )
    }
}

/// 201 with a JSON body that carries no version and has no address of its
/// own (an API key, shown once).
pub struct Made<T>(pub T);

impl<T: Serialize> IntoResponse for Made<T> {
    fn into_response(self) -> Response {
        (StatusCode::CREATED, Json(self.0)).into_response()
    }
}

impl<T: Documented> IntoResponses for Made<T> {
    fn responses() -> BTreeMap<String, RefOr<DocResponse>> {
        one(
            "201",
            answer::<T>(format!("Created: {}.", T::WHAT), T::example()),
        )
    }
}

/// 202: accepted, still under way; poll for the end.
pub struct Accepted<T>(pub T);

impl<T: Serialize> IntoResponse for Accepted<T> {
    fn into_response(self) -> Response {
        (StatusCode::ACCEPTED, Json(self.0)).into_response()
    }
}

impl<T: Documented> IntoResponses for Accepted<T> {
    fn responses() -> BTreeMap<String, RefOr<DocResponse>> {
        one(
            "202",
            answer::<T>(
                format!(
                    "Accepted and still under way: {}, as it is now; poll it for the end.",
                    T::WHAT
                ),
                T::example_running(),
            ),
        )
    }
}

/// 200 when the work ended before the answer, 202 while it runs.
pub enum DoneOr<T> {
    Done(Plain<T>),
    Running(Accepted<T>),
}

impl<T: Serialize> IntoResponse for DoneOr<T> {
    fn into_response(self) -> Response {
        match self {
            DoneOr::Done(j) => j.into_response(),
            DoneOr::Running(a) => a.into_response(),
        }
    }
}

impl<T: Documented> IntoResponses for DoneOr<T> {
    fn responses() -> BTreeMap<String, RefOr<DocResponse>> {
        let mut all = Accepted::<T>::responses();
        all.extend(one(
            "200",
            answer::<T>(
                format!("Ended before the answer: {}.", T::WHAT),
                T::example(),
            ),
        ));
        all
    }
}

/// 204: done, nothing to say.
pub struct NoContent;

impl IntoResponse for NoContent {
    fn into_response(self) -> Response {
        StatusCode::NO_CONTENT.into_response()
    }
}

impl IntoResponses for NoContent {
    fn responses() -> BTreeMap<String, RefOr<DocResponse>> {
        one("204", ResponseBuilder::new().description("Done; no body."))
    }
}

/// A create's answer: 201 with its location, or 200 for a retry.
pub fn deployment_created(creation: Creation) -> CreatedOr<DeploymentView> {
    match creation {
        Creation::Created(view) => CreatedOr::Created(Created {
            location: format!("/api/v1/deployments/{}", view.id),
            body: view,
        }),
        Creation::Replayed(view) => CreatedOr::Existing(Versioned(view)),
    }
}

/// An operation that takes `validate_only`: its own answers, or 200 with
/// what it would do. The document's 200 is one of the two bodies.
pub enum OrValidated<T> {
    Done(T),
    Validated(Box<Plain<DeploymentValidation>>),
}

impl<T: IntoResponse> IntoResponse for OrValidated<T> {
    fn into_response(self) -> Response {
        match self {
            OrValidated::Done(t) => t.into_response(),
            OrValidated::Validated(v) => v.into_response(),
        }
    }
}

impl<T: IntoResponses> IntoResponses for OrValidated<T> {
    fn responses() -> BTreeMap<String, RefOr<DocResponse>> {
        let mut all = T::responses();
        let validation = Ref::from_schema_name(DeploymentValidation::name());
        let what = format!("With `validate_only=true`: {}.", DeploymentValidation::WHAT);
        let example = utoipa::openapi::example::ExampleBuilder::new()
            .summary("validate_only=true")
            .value(Some(DeploymentValidation::example()))
            .build();
        match all.get_mut("200") {
            Some(RefOr::T(ok)) => {
                ok.description = format!("{} {what}", ok.description);
                if let Some(content) = ok.content.get_mut("application/json") {
                    let mut one_of = utoipa::openapi::schema::OneOfBuilder::new();
                    if let Some(schema) = content.schema.take() {
                        one_of = one_of.item(schema);
                    }
                    content.schema = Some(RefOr::T(Schema::OneOf(one_of.item(validation).build())));
                    // Two bodies, two named examples.
                    if let Some(done) = content.example.take() {
                        content.examples.insert(
                            "done".into(),
                            RefOr::T(
                                utoipa::openapi::example::ExampleBuilder::new()
                                    .value(Some(done))
                                    .build(),
                            ),
                        );
                    }
                    content
                        .examples
                        .insert("validate_only".into(), RefOr::T(example));
                }
            }
            _ => {
                all.extend(one(
                    "200",
                    answer::<DeploymentValidation>(what, DeploymentValidation::example()),
                ));
            }
        }
        all
    }
}
