//! OpenAPI links: from each operation that creates something to the
//! operations on what it created, with the runtime expressions that carry
//! its id (and version) over. A client generator or a stateful tester
//! (schemathesis) follows them to chain calls; without them, the operations
//! on one resource can only be reached with ids that guess at nothing.

use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::{OpenApi, RefOr};

/// Where a created resource's id comes from.
const DEPLOYMENT_ID: &str = "$response.body#/id";
const POLICY_ID: &str = "$response.body#/id";
const REPOSITORY_NAME: &str = "$request.path.name";
const ETAG: &str = "$response.header.ETag";
/// A deployment's one Elasticsearch resource (its `elasticsearch.ref_id`
/// appears only once it runs, so the link names it as a constant).
const ELASTICSEARCH_REF_ID: &str = "main-elasticsearch";

/// One link: the target operation and its parameters, each an expression
/// or a constant. A parameter may name its location (`header.If-Match`).
type Target = (&'static str, &'static [(&'static str, &'static str)]);

const ON_DEPLOYMENT: &[Target] = &[
    ("get-deployment", &[("id", DEPLOYMENT_ID)]),
    (
        "update-deployment",
        &[("id", DEPLOYMENT_ID), ("header.If-Match", ETAG)],
    ),
    ("delete-deployment", &[("id", DEPLOYMENT_ID)]),
    ("clone-deployment", &[("id", DEPLOYMENT_ID)]),
    ("restore-deployment", &[("id", DEPLOYMENT_ID)]),
    ("shutdown-deployment", &[("id", DEPLOYMENT_ID)]),
    ("start-deployment", &[("id", DEPLOYMENT_ID)]),
    ("get-deployment-plans", &[("id", DEPLOYMENT_ID)]),
    ("cancel-deployment-pending-plan", &[("id", DEPLOYMENT_ID)]),
    ("list-deployment-snapshots", &[("id", DEPLOYMENT_ID)]),
    ("take-deployment-snapshot", &[("id", DEPLOYMENT_ID)]),
    (
        "reset-elasticsearch-password",
        &[("id", DEPLOYMENT_ID), ("ref_id", ELASTICSEARCH_REF_ID)],
    ),
    ("proxy-elasticsearch-get", PROXY),
    ("proxy-elasticsearch-head", PROXY),
    ("proxy-elasticsearch-post", PROXY),
    ("proxy-elasticsearch-put", PROXY),
    ("proxy-elasticsearch-delete", PROXY),
    ("proxy-elasticsearch-patch", PROXY),
    ("proxy-elasticsearch-options", PROXY),
];

/// The proxy's path below the cluster is the caller's; the link gives the
/// deployment and its Elasticsearch resource.
const PROXY: &[(&str, &str)] = &[("id", DEPLOYMENT_ID), ("ref_id", ELASTICSEARCH_REF_ID)];

const ON_REPOSITORY: &[Target] = &[
    ("get-snapshot-repository", &[("name", REPOSITORY_NAME)]),
    (
        "put-snapshot-repository",
        &[("name", REPOSITORY_NAME), ("header.If-Match", ETAG)],
    ),
    ("delete-snapshot-repository", &[("name", REPOSITORY_NAME)]),
];

const ON_POLICY: &[Target] = &[
    ("get-snapshot-policy", &[("id", POLICY_ID)]),
    (
        "update-snapshot-policy",
        &[("id", POLICY_ID), ("header.If-Match", ETAG)],
    ),
    ("delete-snapshot-policy", &[("id", POLICY_ID)]),
];

const ON_SNAPSHOT: &[Target] = &[
    (
        "get-deployment-snapshot",
        &[
            ("id", "$request.path.id"),
            ("name", "$response.body#/snapshot"),
        ],
    ),
    (
        "delete-deployment-snapshot",
        &[
            ("id", "$request.path.id"),
            ("name", "$response.body#/snapshot"),
        ],
    ),
];

/// Each creating operation, the statuses that answer with what it
/// created (a create, or the replay of one), and its links.
pub(crate) const LINKS: &[(&str, &[&str], &[Target])] = &[
    ("create-deployment", &["200", "201"], ON_DEPLOYMENT),
    ("clone-deployment", &["200", "201"], ON_DEPLOYMENT),
    ("put-snapshot-repository", &["200", "201"], ON_REPOSITORY),
    ("create-snapshot-policy", &["201"], ON_POLICY),
    ("take-deployment-snapshot", &["200", "202"], ON_SNAPSHOT),
];

pub(crate) fn operations_mut(doc: &mut OpenApi) -> impl Iterator<Item = &mut Operation> {
    doc.paths.paths.values_mut().flat_map(|item| {
        [
            item.get.as_mut(),
            item.put.as_mut(),
            item.post.as_mut(),
            item.delete.as_mut(),
            item.options.as_mut(),
            item.head.as_mut(),
            item.patch.as_mut(),
            item.trace.as_mut(),
        ]
        .into_iter()
        .flatten()
    })
}

/// Adds [`LINKS`] to the document's responses.
pub(crate) fn add(doc: &mut OpenApi) {
    for operation in operations_mut(doc) {
        let Some(id) = operation.operation_id.clone() else {
            continue;
        };
        let Some((_, statuses, targets)) = LINKS.iter().find(|(from, _, _)| *from == id) else {
            continue;
        };
        for status in *statuses {
            let Some(RefOr::T(response)) = operation.responses.responses.get_mut(*status) else {
                continue;
            };
            for (target, parameters) in *targets {
                // utoipa 5.5 writes `Link::operation_id` as `operation_id`,
                // which no reader knows: the field goes in under its
                // OpenAPI name instead.
                let link = parameters
                    .iter()
                    .fold(LinkBuilder::new(), |b, (k, v)| b.parameter(*k, *v))
                    .extensions(Some(Extensions::from_iter([("operationId", *target)])))
                    .build();
                response.links.insert((*target).to_string(), RefOr::T(link));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::openapi::path::ParameterIn;

    fn find<'a>(doc: &'a OpenApi, id: &str) -> Option<&'a Operation> {
        doc.paths.paths.values().find_map(|item| {
            [
                &item.get,
                &item.put,
                &item.post,
                &item.delete,
                &item.options,
                &item.head,
                &item.patch,
                &item.trace,
            ]
            .into_iter()
            .flatten()
            .find(|op| op.operation_id.as_deref() == Some(id))
        })
    }

    /// A link that names an operation, a status or a parameter the document
    /// does not have is silently useless: each must exist, and every path
    /// parameter of the target but `path` (the proxy's, free) is given.
    #[test]
    fn every_link_reaches_a_real_operation_with_its_parameters() {
        let doc = crate::openapi();
        let json = serde_json::to_value(&doc).unwrap_or_default();
        assert!(
            json.pointer(
                "/paths/~1api~1v1~1deployments/post/responses/201/links/get-deployment/operationId"
            ) == Some(&serde_json::json!("get-deployment")),
            "links carry `operationId`"
        );
        for (from, statuses, targets) in LINKS {
            let op = find(&doc, from).unwrap_or_else(|| panic!("no operation {from}"));
            for status in *statuses {
                let Some(RefOr::T(response)) = op.responses.responses.get(*status) else {
                    panic!("{from} documents no {status}");
                };
                assert_eq!(response.links.len(), targets.len(), "{from} {status}");
            }
            for (target, parameters) in *targets {
                let to = find(&doc, target).unwrap_or_else(|| panic!("no operation {target}"));
                let declared: Vec<(String, ParameterIn)> = to
                    .parameters
                    .iter()
                    .flatten()
                    .map(|p| (p.name.clone(), p.parameter_in.clone()))
                    .collect();
                for (name, _) in *parameters {
                    let bare = name.rsplit('.').next().unwrap_or(name);
                    assert!(
                        declared.iter().any(|(n, _)| n == bare),
                        "{from} -> {target}: no parameter {name}"
                    );
                }
                for (name, place) in &declared {
                    if matches!(place, ParameterIn::Path) && name != "path" {
                        assert!(
                            parameters.iter().any(|(n, _)| n == name),
                            "{from} -> {target}: path parameter {name} not given"
                        );
                    }
                }
            }
        }
    }
}
