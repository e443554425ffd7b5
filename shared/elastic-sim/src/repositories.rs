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

fn s3_store(sim: &Sim, repo: &str, settings: &Map<String, Value>) -> Result<BlobStore, ApiError> {
    let bucket = setting_str(settings, "bucket")
        .filter(|b| !b.is_empty())
        .ok_or_else(|| ApiError::repository(repo, "No bucket defined for s3 repository"))?;
    let Some(access) = &sim.s3 else {
        return Err(ApiError::repository(
            repo,
            "the simulated cluster has no S3 client credentials (start it with SimConfig.s3)",
        ));
    };
    let base_path = setting_str(settings, "base_path").unwrap_or_default();
    let base_path = base_path.trim_matches('/');
    let prefix = if base_path.is_empty() {
        String::new()
    } else {
        format!("{base_path}/")
    };
    // The repository's own endpoint wins, as a node's client settings do;
    // Elasticsearch writes it without a scheme and takes `protocol` apart.
    let endpoint = match setting_str(settings, "endpoint").filter(|e| !e.is_empty()) {
        Some(endpoint) if endpoint.contains("://") => Some(endpoint),
        Some(endpoint) => {
            let protocol = setting_str(settings, "protocol").unwrap_or_else(|| "https".into());
            Some(format!("{protocol}://{endpoint}"))
        }
        None => access.endpoint_url.clone(),
    };
    let path_style = setting_bool(settings, "path_style_access").unwrap_or(access.force_path_style);
    let region = setting_str(settings, "region").unwrap_or_else(|| access.region.clone());
    let credentials = Credentials::new(
        access.access_key.clone(),
        access.secret_key.expose().to_string(),
        None,
        None,
        "floe-elastic-sim",
    );
    let mut config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region))
        .credentials_provider(credentials)
        .force_path_style(path_style);
    if let Some(endpoint) = endpoint {
        config = config.endpoint_url(endpoint);
    }
    Ok(BlobStore::S3 {
        client: aws_sdk_s3::Client::from_conf(config.build()),
        bucket,
        prefix,
    })
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
    let store = match repo_type.as_str() {
        "fs" => BlobStore::Fs {
            dir: fs_dir(sim, repo, &settings)?,
        },
        "s3" => s3_store(sim, repo, &settings)?,
        other => {
            return Err(ApiError::repository(
                repo,
                &format!("repository type [{other}] does not exist"),
            ));
        }
    };
    ensure_unused(sim, repo)?;
    let readonly = setting_bool(&settings, "readonly").unwrap_or(false);
    let repository = Repository {
        repo_type,
        settings,
        readonly,
        store,
        write_lock: Arc::new(tokio::sync::Mutex::new(())),
    };
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
