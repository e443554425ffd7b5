//! Storage of Floe's records. `backend` is the port the adapters implement
//! (SQLite embedded, DynamoDB in production); `stores` holds the typed,
//! per-aggregate operations every caller uses.

pub mod backend;
pub mod dynamo;
pub mod sqlite;
pub mod stores;

pub use backend::{Backend, BackendError, Filter, Kind};
pub use stores::{
    ActivePlan, DeploymentOutcome, Idempotency, IdempotencyRecord, Page, PageRequest, Store,
    StoreError, Versioned,
};
