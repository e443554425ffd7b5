pub mod deployments;
pub mod platform;
pub mod policies;
pub mod repositories;
