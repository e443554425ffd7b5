//! Typed answers: each sets its status and the headers its kind of
//! resource carries, so a handler says what it answers, not how.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use floe_app::deployments::Creation;
use floe_domain::deployment::DeploymentView;
use floe_domain::policy::PolicyView;
use floe_domain::repository::RepositoryView;
use serde::Serialize;

/// A resource that carries its version.
pub trait HasVersion {
    fn version(&self) -> u64;
}

impl HasVersion for DeploymentView {
    fn version(&self) -> u64 {
        self.resource_version
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

fn with_version(mut r: Response, version: u64) -> Response {
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("\"{version}\"")) {
        h.insert(header::ETAG, v);
    }
    h.insert("x-cloud-resource-version", HeaderValue::from(version));
    r
}

/// 200 (or 202 with [`Versioned::accepted`]) with the resource's version as
/// `ETag` and ECE's `x-cloud-resource-version`.
pub struct Versioned<T> {
    status: StatusCode,
    body: T,
}

impl<T> Versioned<T> {
    pub fn ok(body: T) -> Versioned<T> {
        Versioned {
            status: StatusCode::OK,
            body,
        }
    }

    /// A change was accepted and runs as a plan; the body is the resource now.
    pub fn accepted(body: T) -> Versioned<T> {
        Versioned {
            status: StatusCode::ACCEPTED,
            body,
        }
    }
}

impl<T: Serialize + HasVersion> IntoResponse for Versioned<T> {
    fn into_response(self) -> Response {
        let version = self.body.version();
        with_version((self.status, Json(self.body)).into_response(), version)
    }
}

/// 201 with `Location` and the new resource's version headers.
pub struct Created<T> {
    pub location: String,
    pub body: T,
}

impl<T: Serialize + HasVersion> IntoResponse for Created<T> {
    fn into_response(self) -> Response {
        let version = self.body.version();
        let mut r = with_version(
            (StatusCode::CREATED, Json(self.body)).into_response(),
            version,
        );
        if let Ok(v) = HeaderValue::from_str(&self.location) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        r
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

/// 202: accepted, still under way; poll for the end.
pub struct Accepted<T>(pub T);

impl<T: Serialize> IntoResponse for Accepted<T> {
    fn into_response(self) -> Response {
        (StatusCode::ACCEPTED, Json(self.0)).into_response()
    }
}

/// 200 when the work ended before the answer, 202 while it runs.
pub enum DoneOr<T> {
    Done(Json<T>),
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

/// 204: done, nothing to say.
pub struct NoContent;

impl IntoResponse for NoContent {
    fn into_response(self) -> Response {
        StatusCode::NO_CONTENT.into_response()
    }
}

/// A create's answer: 201 with its location, or 200 for a retry.
pub fn deployment_created(creation: Creation) -> CreatedOr<DeploymentView> {
    match creation {
        Creation::Created(view) => CreatedOr::Created(Created {
            location: format!("/api/v1/deployments/{}", view.id),
            body: view,
        }),
        Creation::Replayed(view) => CreatedOr::Existing(Versioned::ok(view)),
    }
}

/// The schemas answered through [`Versioned`] and [`Created`]: every
/// response with one of them as its body carries the version headers.
fn versioned_schemas() -> [String; 3] {
    use utoipa::ToSchema;
    [
        DeploymentView::name().into_owned(),
        RepositoryView::name().into_owned(),
        PolicyView::name().into_owned(),
    ]
}

/// Documents the headers the typed answers send: `ETag` and
/// `x-cloud-resource-version` on a versioned resource, and `Location` on
/// a created one.
pub struct VersionHeaders;

impl utoipa::Modify for VersionHeaders {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::{Object, Type};
        use utoipa::openapi::{Header, RefOr};
        let refs = versioned_schemas().map(|name| format!("#/components/schemas/{name}"));
        let header = |ty: Type, description: &str| {
            let mut h = Header::new(Object::with_type(ty));
            h.description = Some(description.into());
            h
        };
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                item.get.as_mut(),
                item.put.as_mut(),
                item.post.as_mut(),
                item.delete.as_mut(),
            ];
            for op in operations.into_iter().flatten() {
                for (status, response) in op.responses.responses.iter_mut() {
                    let RefOr::T(response) = response else {
                        continue;
                    };
                    let versioned = status.starts_with('2')
                        && response.content.get("application/json").is_some_and(|c| {
                            matches!(&c.schema, Some(RefOr::Ref(r)) if refs.contains(&r.ref_location))
                        });
                    if !versioned {
                        continue;
                    }
                    response.headers.insert(
                        "ETag".into(),
                        header(Type::String, "The resource's version, for `If-Match`."),
                    );
                    response.headers.insert(
                        "x-cloud-resource-version".into(),
                        header(Type::Integer, "The resource's version (ECE)."),
                    );
                    if status == "201" {
                        response.headers.insert(
                            "Location".into(),
                            header(Type::String, "The new resource's path."),
                        );
                    }
                }
            }
        }
    }
}
