//! Starting and stopping the server.

use crate::config::LocalS3Config;
use crate::error::S3LocalError;
use crate::handlers::{self, AppState};
use crate::store::{self, Store};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long [`RunningS3::shutdown`] lets requests in flight finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The entry point: `LocalS3::start(config)`.
pub struct LocalS3;

impl LocalS3 {
    /// Prepares the folder, creates the configured buckets, and serves on
    /// `config.listen` until the returned handle is shut down or dropped.
    pub async fn start(config: LocalS3Config) -> Result<RunningS3, S3LocalError> {
        if !config.listen.ip().is_loopback() {
            return Err(S3LocalError::NotLoopback(config.listen));
        }
        if config.credentials.access_key_id.is_empty()
            || config.credentials.secret_access_key.is_empty()
        {
            return Err(S3LocalError::EmptyCredentials);
        }
        for bucket in &config.buckets {
            store::check_bucket_name(bucket).map_err(|reason| S3LocalError::InvalidBucketName {
                name: bucket.clone(),
                reason,
            })?;
        }
        let root = config.root.clone();
        let buckets = config.buckets.clone();
        let store = tokio::task::spawn_blocking(move || -> Result<Store, S3LocalError> {
            let storage = |source| S3LocalError::Storage {
                path: root.clone(),
                source,
            };
            let store = Store::open(&root).map_err(storage)?;
            for bucket in &buckets {
                store.ensure_bucket_sync(bucket).map_err(storage)?;
            }
            Ok(store)
        })
        .await
        .map_err(|_| S3LocalError::ServerTask)??;

        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| S3LocalError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| S3LocalError::Bind {
            addr: config.listen,
            source,
        })?;
        let state = AppState {
            store,
            credentials: Arc::new(config.credentials),
            region: Arc::from(config.region.as_str()),
            virtual_host_domain: config.virtual_host_domain.as_deref().map(Arc::from),
        };
        let app = axum::Router::new()
            .fallback(handlers::handle)
            .with_state(state);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    // A dropped sender stops the server too.
                    let _ = stopped.await;
                })
                .await
        });
        tracing::info!(%addr, root = %config.root.display(), "floe-s3-local: serving S3");
        Ok(RunningS3 {
            addr,
            root: config.root,
            stop: Some(stop),
            task: Some(task),
        })
    }
}

/// A running server. Dropping it closes the listening socket at once and
/// tells open connections to close once their request in flight is answered
/// (uploads cut short are discarded, never half-stored);
/// [`RunningS3::shutdown`] does the same and waits for them.
#[derive(Debug)]
pub struct RunningS3 {
    addr: SocketAddr,
    root: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl RunningS3 {
    /// The bound address (the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:port`, for `endpoint_url` and Elasticsearch's
    /// `s3.client.*.endpoint` (with `protocol: http`).
    pub fn endpoint_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Stops accepting connections, waits up to 10 s for requests in
    /// flight, then stops.
    pub async fn shutdown(mut self) -> Result<(), S3LocalError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(mut task) = self.task.take() else {
            return Ok(());
        };
        match tokio::time::timeout(SHUTDOWN_GRACE, &mut task).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(error))) => Err(S3LocalError::Server(error)),
            Ok(Err(_)) => Err(S3LocalError::ServerTask),
            Err(_) => {
                // A client that holds a request open past the grace period.
                tracing::warn!(
                    "floe-s3-local: requests still open after the grace period; stopping"
                );
                task.abort();
                Ok(())
            }
        }
    }
}

impl Drop for RunningS3 {
    fn drop(&mut self) {
        // The signal reaches the connections through axum's own task, which
        // outlives the accept loop aborted here.
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
