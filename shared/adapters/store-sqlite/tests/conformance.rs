//! The storage conformance suite of `floe-store` on SQLite, a temporary
//! file per test.

use floe_store::{Backend, Store};
use floe_store_sqlite::SqliteBackend;
use std::sync::Arc;

async fn sqlite_store() -> Result<(Store, tempfile::TempDir), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let backend: Arc<dyn Backend> = Arc::new(SqliteBackend::open(&dir.path().join("floe.db"))?);
    Ok((Store::new(backend), dir))
}

floe_store::conformance_suite!(sqlite_store);
