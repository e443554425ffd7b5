pub mod deployments;
pub mod plans;
pub mod platform;
pub mod policies;
pub mod proxy;
pub mod repositories;
pub mod restore;
pub mod snapshots;
