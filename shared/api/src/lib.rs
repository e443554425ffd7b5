//! Floe's HTTP API: one axum router whose OpenAPI document is collected from
//! the real handlers, served the same way on Lambda and on a local port.

mod access;
pub mod error;
mod error_codes;
mod examples;
pub mod extract;
mod links;
pub mod params;
mod respond;
mod responses;
pub mod routes;
mod rules;
pub mod state;

pub use error::ApiError;
pub use state::ApiState;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use axum::routing::get;
use floe_domain::Code;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Floe API",
        description = "A serverless control plane for Elasticsearch deployments on AWS: snapshot repositories, \
deployments on Graviton or x86 EC2 node groups, snapshot policies, restores and clones.\n\n\
Errors have ECE's shape, `{\"errors\":[{\"code\",\"message\",\"fields\"}]}`, with the codes in `x-cloud-error-codes`. \
Every resource carries a version (`ETag`, `x-cloud-resource-version`); updates and deletes take `If-Match` or `?version=`. \
Every answer carries `x-request-id`: the client's own when it is 1 to 128 visible ASCII characters, a new UUID otherwise; \
the same id is in every log line the request wrote. \
Platform roles may act in another organization with the `x-floe-organization` header.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
        contact(name = "The Floe maintainers"),
    ),
    // Relative: the API is wherever this document is served from
    // (`GET /api/v1/openapi.json`): floe-local's address, or the stack's
    // API Gateway URL (its `ApiUrl` output).
    servers((url = "/", description = "The API that serves this document: http://127.0.0.1:8080 for ./scripts/run.sh, the stack's `ApiUrl` output on AWS.")),
    modifiers(&BearerAuth),
    tags(
        (name = "snapshot-repositories", description = "Where snapshots are kept: S3 on AWS or any S3-compatible store, or a local folder."),
        (name = "deployments", description = "Elasticsearch deployments and their node groups."),
        (name = "snapshot-policies", description = "Snapshot schedules and retention."),
        (name = "platform", description = "Health, the instance catalog and the platform license."),
        (name = "api-keys", description = "API keys for scripts, sent as `Authorization: ApiKey {key}` wherever a bearer token is taken."),
    ),
    components(schemas(error::ErrorBody, error::ErrorItem))
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let mut http = Http::new(HttpAuthScheme::Bearer);
        http.bearer_format = Some("JWT".into());
        http.description = Some(
            "A JWT with claims `sub`, `org`, `roles` (platform_admin, platform_viewer, deployment_manager, deployment_viewer), `iss`, `aud`, `exp`.".into(),
        );
        components.add_security_scheme("bearer", SecurityScheme::Http(http));
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "Authorization",
                "An API key (`POST /api/v1/users/auth/keys`), sent as `Authorization: ApiKey {key}`: it acts with its maker's organization and the roles it was given.",
            ))),
        );
    }
}

/// Every operation that takes a bearer token takes an API key instead.
fn api_keys_stand_for_tokens(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::SecurityRequirement;
    for op in links::operations_mut(doc) {
        // Public operations declare no security; every other one takes
        // the bearer token.
        if let Some(security) = op.security.as_mut()
            && !security.is_empty()
        {
            security.push(SecurityRequirement::new("api_key", Vec::<String>::new()));
        }
    }
}

/// The document as the operations declare it (their routes are built
/// again, and dropped: `app` serves from `serve`, which builds no document).
fn collected() -> utoipa::openapi::OpenApi {
    let (_, mut doc) = OpenApiRouter::<ApiState>::with_openapi(ApiDoc::openapi())
        .merge(routes::platform::router())
        .merge(routes::license::router())
        .merge(routes::api_keys::router())
        .merge(routes::repositories::router())
        .merge(routes::deployments::router())
        .merge(routes::plans::router())
        .merge(routes::restore::router())
        .merge(routes::drills::router())
        .merge(routes::snapshots::router())
        .merge(routes::policies::router())
        .split_for_parts();
    // The proxy's catch-all route is served as axum has it; the document
    // spells it as one path parameter.
    doc.merge(routes::proxy::ProxyDoc::openapi());
    links::add(&mut doc);
    headers_are_never_null(&mut doc);
    api_keys_stand_for_tokens(&mut doc);
    // The answers document themselves by reference to their bodies'
    // schemas; the components hold each one.
    let components = doc.components.get_or_insert_with(Default::default);
    for (name, schema) in respond::answer_schemas() {
        components.schemas.entry(name).or_insert(schema);
    }
    all_of_parts_are_open(&mut doc);
    error_codes::document(&mut doc);
    rules::state(&mut doc);
    doc
}

/// An optional header is absent or text: utoipa documents an `Option`
/// header as `string | null`, and a client (or schemathesis) would then
/// send the text `null`.
fn headers_are_never_null(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::RefOr;
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::schema::{Schema, SchemaType, Type};
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
            &mut item.trace,
        ];
        for op in operations.into_iter().flatten() {
            for p in op.parameters.iter_mut().flatten() {
                if !matches!(p.parameter_in, ParameterIn::Header) {
                    continue;
                }
                if let Some(RefOr::T(Schema::Object(o))) = p.schema.as_mut()
                    && let SchemaType::Array(types) = &o.schema_type
                {
                    let types: Vec<Type> = types
                        .iter()
                        .filter(|t| **t != Type::Null)
                        .cloned()
                        .collect();
                    if let [only] = types.as_slice() {
                        o.schema_type = SchemaType::Type(only.clone());
                    }
                }
            }
        }
    }
}

/// A view is its spec and more (`allOf` of the spec's schema and the
/// view's own fields). A spec refuses unknown fields (`additionalProperties:
/// false`), and in JSON Schema each part of an `allOf` judges the whole
/// object, so the view's own fields would break its spec's part: every
/// view answered would violate its schema. The spec's part of a view is
/// therefore the spec's schema, open.
fn all_of_parts_are_open(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::Schema;
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    let closed: std::collections::BTreeMap<String, Schema> = components
        .schemas
        .iter()
        .filter_map(|(name, schema)| match schema {
            RefOr::T(Schema::Object(o)) if o.additional_properties.is_some() => {
                let mut open = o.clone();
                open.additional_properties = None;
                Some((format!("#/components/schemas/{name}"), Schema::Object(open)))
            }
            _ => None,
        })
        .collect();
    for schema in components.schemas.values_mut() {
        if let RefOr::T(Schema::AllOf(all)) = schema {
            for part in all.items.iter_mut() {
                if let RefOr::Ref(r) = part
                    && let Some(open) = closed.get(&r.ref_location)
                {
                    *part = RefOr::T(open.clone());
                }
            }
        }
    }
}

/// The OpenAPI document, as collected from the router.
pub fn openapi() -> utoipa::openapi::OpenApi {
    collected()
}

/// The document as committed in `openapi/openapi.json` (pretty, newline-terminated).
pub fn openapi_json() -> String {
    let mut s = openapi()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

/// The contract as committed: served as it is, so no cold start serialises
/// it (the drift test proves it equals [`openapi_json`]).
const COMMITTED_DOCUMENT: &str = include_str!("../../../openapi/openapi.json");

/// The whole application: routes, auth, limits, request ids and tracing.
pub fn app(state: impl Into<ApiState>) -> Router {
    let state: ApiState = state.into();
    // The routes only: the document is served as committed, not collected.
    let serve: [fn(Router<ApiState>) -> Router<ApiState>; 10] = [
        routes::platform::serve,
        routes::license::serve,
        routes::api_keys::serve,
        routes::repositories::serve,
        routes::deployments::serve,
        routes::plans::serve,
        routes::restore::serve,
        routes::drills::serve,
        routes::snapshots::serve,
        routes::policies::serve,
    ];
    serve
        .iter()
        .fold(Router::new(), |router, serve| serve(router))
        .merge(routes::proxy::router())
        .route(
            OPENAPI_PATH,
            get(|| async {
                (
                    [(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    )],
                    COMMITTED_DOCUMENT,
                )
            }),
        )
        .fallback(|| async {
            ApiError::new(
                Code::ROOT_NOT_FOUND,
                "no such API path; see /api/v1/openapi.json",
            )
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                Code::ROOT_METHOD_NOT_ALLOWED,
                "this path does not take that method",
            )
        })
        .with_state(state)
        // One `layer` call for all three: each call wraps every route in
        // another boxed service, cloned for every request.
        .layer(
            tower::ServiceBuilder::new()
                // Outermost, so that a panic's line and every other line
                // carry the request, and even a caught panic's answer has
                // its id.
                .layer(access::AccessLogLayer)
                .layer(CatchPanicLayer::custom(|_| {
                    tracing::error!("a handler panicked");
                    ApiError::internal().into_response()
                }))
                .layer(DefaultBodyLimit::max(extract::MAX_BODY_BYTES)),
        )
}
