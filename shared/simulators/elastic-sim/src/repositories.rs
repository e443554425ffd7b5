//! Snapshot repository APIs: register (`PUT _snapshot/{repo}`), get,
//! delete and verify. A registration points the cluster at a folder or a
//! bucket; the snapshots themselves stay there.

use crate::blobs::BlobStore;
use crate::error::ApiError;
use crate::server::{ApiResult, Reply, Req};
use crate::state::{Repository, Sim};
use crate::util::{body_string, glob_match, parse_bool, split_names};
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use serde_json::{Map, Value, json};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

fn setting_str(settings: &Map<String, Value>, key: &str) -> Option<String> {
    match settings.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn setting_bool(settings: &Map<String, Value>, key: &str) -> Option<bool> {
    match settings.get(key)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => Some(s == "true"),
        _ => None,
    }
}

/// Where an `fs` repository's `location` points, held to `path.repo` as
/// Elasticsearch holds it.
fn fs_dir(sim: &Sim, repo: &str, settings: &Map<String, Value>) -> Result<PathBuf, ApiError> {
    let location = setting_str(settings, "location")
        .filter(|l| !l.is_empty())
        .ok_or_else(|| ApiError::repository(repo, "missing location"))?;
    let Some(root) = &sim.fs_root else {
        return Err(ApiError::repository(
            repo,
            &format!(
                "location [{location}] doesn't match any of the locations specified by path.repo because this setting is empty"
            ),
        ));
    };
    let path = Path::new(&location);
    let escapes = path.components().any(|c| c == Component::ParentDir);
    let dir = if path.is_absolute() {
        path.to_path_buf()
    } else {
        root.join(path)
    };
    if escapes || !dir.starts_with(root) {
        return Err(ApiError::repository(
            repo,
            &format!(
                "location [{location}] doesn't match any of the locations specified by path.repo"
            ),
        ));
    }
    Ok(dir)
}

/// The store of an `s3` repository: the bucket and base path from the
/// repository's settings, reached with the nodes' S3 client, whose
/// `endpoint`, `protocol`, `path_style_access` and `region` the
/// repository's own settings of those names override (as Elasticsearch's
/// `S3ClientSettings#refine` does). The simulator has one S3 client,
/// whatever `client` name the repository gives.
pub fn s3_store(
    sim: &Sim,
    repo: &str,
    settings: &Map<String, Value>,
) -> Result<BlobStore, ApiError> {
    let bucket = setting_str(settings, "bucket")
        .filter(|b| !b.is_empty())
        .ok_or_else(|| ApiError::repository(repo, "No bucket defined for s3 repository"))?;
    let base_path = setting_str(settings, "base_path").unwrap_or_default();
    let base_path = base_path.trim_matches('/');
    let prefix = if base_path.is_empty() {
        String::new()
    } else {
        format!("{base_path}/")
    };
    let client = sim.s3_client().unwrap_or_default();
    let endpoint = setting_str(settings, "endpoint")
        .filter(|e| !e.is_empty())
        .or_else(|| client.endpoint.clone().filter(|e| !e.is_empty()));
    let protocol = setting_str(settings, "protocol")
        .or_else(|| client.protocol.clone())
        .unwrap_or_else(|| "https".into());
    // Elasticsearch writes the endpoint without a scheme and takes
    // `protocol` apart; one with a scheme is used as it is.
    let url = match &endpoint {
        Some(e) if e.contains("://") => e.clone(),
        Some(e) => format!("{protocol}://{e}"),
        None => format!("{protocol}://s3.amazonaws.com"),
    };
    let path_style = setting_bool(settings, "path_style_access")
        .or(client.path_style_access)
        .unwrap_or(false);
    let region = setting_str(settings, "region")
        .or_else(|| client.region.clone())
        .unwrap_or_else(|| "us-east-1".into());
    let Some(keys) = client.keys else {
        // A real node without keys asks its instance role; the simulator
        // has none, so every request fails as a node's would off EC2.
        return Ok(BlobStore::Unreachable {
            describe: format!("s3://{bucket}/{prefix}"),
            reason: format!(
                "Unable to load credentials from any of the providers in the chain: no s3.client.{}.access_key and secret_key in the keystore, and no instance role",
                setting_str(settings, "client").unwrap_or_else(|| "default".into())
            ),
        });
    };
    let credentials = Credentials::new(
        keys.access_key.clone(),
        keys.secret_key.expose().to_string(),
        keys.session_token.as_ref().map(|t| t.expose().to_string()),
        None,
        "floe-elastic-sim",
    );
    let mut config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region))
        .credentials_provider(credentials)
        .force_path_style(path_style)
        // An address that never answers fails in seconds, not minutes.
        .timeout_config(
            aws_sdk_s3::config::timeout::TimeoutConfig::builder()
                .connect_timeout(std::time::Duration::from_secs(5))
                .build(),
        );
    if endpoint.is_some() {
        config = config.endpoint_url(url.clone());
    }
    Ok(BlobStore::S3 {
        client: aws_sdk_s3::Client::from_conf(config.build()),
        endpoint: url,
        bucket,
        prefix,
    })
}

/// Points every `s3` repository at the nodes' S3 client as it is now
/// (after a reload of the secure settings, or new client settings);
/// what a repository read so far stays valid.
pub fn rebuild_s3_stores(sim: &Sim) {
    let registered: Vec<(String, Map<String, Value>)> = sim
        .state()
        .repositories
        .iter()
        .filter(|(_, r)| r.repo_type == "s3")
        .map(|(n, r)| (n.clone(), r.settings.clone()))
        .collect();
    for (name, settings) in registered {
        match s3_store(sim, &name, &settings) {
            Ok(store) => {
                if let Some(r) = sim.state().repositories.get_mut(&name) {
                    r.store = store;
                }
            }
            Err(error) => {
                tracing::warn!(repository = %name, reason = %error.reason, "simulated cluster kept a repository's old S3 client");
            }
        }
    }
}

/// Where a repository of `repo_type` with `settings` keeps its blobs.
fn store_for(
    sim: &Sim,
    repo: &str,
    repo_type: &str,
    settings: &Map<String, Value>,
) -> Result<BlobStore, ApiError> {
    match repo_type {
        "fs" => Ok(BlobStore::Fs {
            dir: fs_dir(sim, repo, settings)?,
        }),
        "s3" => s3_store(sim, repo, settings),
        other => Err(ApiError::repository(
            repo,
            &format!("repository type [{other}] does not exist"),
        )),
    }
}

impl Repository {
    fn new(repo_type: String, settings: Map<String, Value>, store: BlobStore) -> Repository {
        Repository {
            readonly: setting_bool(&settings, "readonly").unwrap_or(false),
            repo_type,
            settings,
            store,
            write_lock: Arc::new(tokio::sync::Mutex::new(())),
            cache: Arc::default(),
        }
    }
}

/// A repository the cluster registered before it restarted, as its
/// metadata kept it. One whose settings no longer hold here (a location
/// outside `path.repo` now) stays registered and fails every use, as
/// Elasticsearch keeps a repository it cannot create.
pub fn registered(
    sim: &Sim,
    repo: &str,
    repo_type: String,
    settings: Map<String, Value>,
) -> Repository {
    let store =
        store_for(sim, repo, &repo_type, &settings).unwrap_or_else(|e| BlobStore::Unreachable {
            describe: format!("{repo_type} repository [{repo}]"),
            reason: e.reason,
        });
    Repository::new(repo_type, settings, store)
}

/// A repository in use by a running snapshot cannot be changed or removed.
fn ensure_unused(sim: &Sim, repo: &str) -> Result<(), ApiError> {
    if sim.state().running.contains_key(repo) {
        return Err(ApiError {
            status: axum::http::StatusCode::CONFLICT,
            error_type: "repository_conflict_exception",
            reason: format!(
                "[{repo}] trying to modify or unregister repository that is currently used (snapshot is in progress)"
            ),
            extra: Map::new(),
        });
    }
    Ok(())
}

pub async fn put(sim: &Arc<Sim>, req: &Req, repo: &str) -> ApiResult {
    let body = req.json()?;
    let repo_type =
        body_string(&body, "type")?.ok_or_else(|| ApiError::validation("type is missing"))?;
    let settings = match body.get("settings") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(settings)) => settings.clone(),
        Some(other) => {
            return Err(ApiError::x_content_parse(format!(
                "[settings] must be an object, not {other}"
            )));
        }
    };
    let store = store_for(sim, repo, &repo_type, &settings)?;
    ensure_unused(sim, repo)?;
    let repository = Repository::new(repo_type, settings, store);
    let readonly = repository.readonly;
    // Registered first and verified after, as Elasticsearch does: a
    // repository that fails verification stays registered.
    sim.state()
        .repositories
        .insert(repo.to_string(), repository.clone());
    tracing::info!(
        repository = repo,
        location = %repository.store.describe(),
        readonly,
        "simulated cluster registered a snapshot repository"
    );
    if parse_bool("verify", req.param("verify"), true)? {
        verify_store(repo, &repository).await?;
    }
    Ok(Reply::acknowledged())
}

/// Writes, reads back and removes a test blob; a read-only repository is
/// only checked for being there, since it must not be written.
async fn verify_store(repo: &str, repository: &Repository) -> Result<(), ApiError> {
    let store = &repository.store;
    let fail = |why: String| {
        ApiError::repository_verification(
            repo,
            &format!(
                "path [{}] is not accessible on master node: {why}",
                store.describe()
            ),
        )
        .caused_by("i_o_exception", &why)
    };
    if repository.readonly {
        return match store.container_exists().await {
            Ok(true) => Ok(()),
            Ok(false) => Err(fail("it does not exist".to_string())),
            Err(e) => Err(fail(e.to_string())),
        };
    }
    let name = format!("tests-{}/master.dat", crate::util::new_uuid());
    let token = crate::util::new_uuid().into_bytes();
    store
        .write(&name, token.clone())
        .await
        .map_err(|e| fail(e.to_string()))?;
    let read = store.read(&name).await.map_err(|e| fail(e.to_string()))?;
    store.delete(&name).await.map_err(|e| fail(e.to_string()))?;
    if let BlobStore::Fs { dir } = store {
        // The test blob's folder is the simulator's own litter.
        let folder = dir.join(name.split('/').next().unwrap_or_default());
        let _ = tokio::fs::remove_dir(folder).await;
    }
    if read.as_deref() != Some(token.as_slice()) {
        return Err(fail(
            "the test blob did not read back as written".to_string(),
        ));
    }
    Ok(())
}

/// Registered repositories matching an expression (`a,b`, `logs-*`,
/// `_all`); an explicit name that is not registered is an error.
fn matching(sim: &Sim, expression: Option<&str>) -> Result<Vec<(String, Repository)>, ApiError> {
    let state = sim.state();
    let expressions = expression.map(split_names).unwrap_or_default();
    let all = expressions.is_empty() || expressions.iter().any(|e| e == "_all" || e == "*");
    if all {
        return Ok(state
            .repositories
            .iter()
            .map(|(n, r)| (n.clone(), r.clone()))
            .collect());
    }
    let mut out: Vec<(String, Repository)> = Vec::new();
    for expression in &expressions {
        if expression.contains('*') {
            for (name, repository) in &state.repositories {
                if glob_match(expression, name) && !out.iter().any(|(n, _)| n == name) {
                    out.push((name.clone(), repository.clone()));
                }
            }
        } else {
            let repository = state
                .repositories
                .get(expression)
                .ok_or_else(|| ApiError::repository_missing(expression))?;
            out.push((expression.clone(), repository.clone()));
        }
    }
    Ok(out)
}

pub fn get(sim: &Sim, expression: Option<&str>) -> ApiResult {
    let mut out = Map::new();
    for (name, repository) in matching(sim, expression)? {
        // Elasticsearch reports every setting as a string.
        let settings: Map<String, Value> = repository
            .settings
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => Value::String(s.clone()),
                    other => Value::String(other.to_string()),
                };
                (k.clone(), v)
            })
            .collect();
        out.insert(
            name,
            json!({ "type": repository.repo_type, "settings": settings }),
        );
    }
    Ok(Reply::ok(Value::Object(out)))
}

pub fn delete(sim: &Sim, expression: &str) -> ApiResult {
    let names: Vec<String> = matching(sim, Some(expression))?
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    if names.is_empty() {
        return Err(ApiError::repository_missing(expression));
    }
    for name in &names {
        ensure_unused(sim, name)?;
    }
    let mut state = sim.state();
    for name in &names {
        state.repositories.remove(name);
    }
    Ok(Reply::acknowledged())
}

pub async fn verify(sim: &Arc<Sim>, repo: &str) -> ApiResult {
    let repository = repository(sim, repo)?;
    verify_store(repo, &repository).await?;
    let nodes: Map<String, Value> = sim
        .nodes()
        .iter()
        .map(|n| (n.id.clone(), json!({ "name": n.name })))
        .collect();
    Ok(Reply::ok(json!({ "nodes": nodes })))
}

/// A registered repository, or `repository_missing_exception`.
pub fn repository(sim: &Sim, repo: &str) -> Result<Repository, ApiError> {
    sim.state()
        .repositories
        .get(repo)
        .cloned()
        .ok_or_else(|| ApiError::repository_missing(repo))
}
