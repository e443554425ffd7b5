//! Floe's domain: entities, validated inputs, the instance catalog and the
//! schedule rules. No I/O and no AWS or HTTP dependency, so every other crate
//! can use it and its tests run in milliseconds.

pub mod access;
pub mod api_key;
pub mod bucket_claim;
pub mod bytesize;
pub mod catalog;
pub mod codes;
pub mod cron;
pub mod deployment;
pub mod drill;
pub mod health;
pub mod license;
pub mod names;
pub mod plan;
pub mod policy;
pub mod replacement;
pub mod repository;
pub mod restore;
pub mod schedule;
pub mod secret;
pub mod snapshot;
pub mod snapshot_name;
pub mod timevalue;
pub mod user_settings;
pub mod validation;

pub use codes::Code;
pub use validation::{FieldError, Invalid, Problems};
