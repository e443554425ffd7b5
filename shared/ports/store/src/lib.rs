//! Storage of Floe's records. `backend` is the port the adapters implement
//! (`floe-store-sqlite` embedded, `floe-store-dynamo` in production);
//! `stores` holds the typed, per-aggregate operations every caller uses
//! (one file per aggregate);
//! `memo` keeps what was made of unchanged records (views shown again);
//! `conformance` (feature `conformance`) is the suite every adapter passes.

pub mod backend;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod memo;
pub mod stores;

pub use backend::{Backend, BackendError, Filter, Kind};
pub use memo::{Memo, Weigh};
pub use stores::{
    ActivePlan, ClaimChange, DeploymentOutcome, DrillLock, FLEET_SHARDS, Idempotency,
    IdempotencyRecord, Page, PageRequest, SnapshotPages, SnapshotPin, Store, StoreError, Versioned,
    drill_key, fleet_shard,
};
