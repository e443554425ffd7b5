//! The simulated cluster driven over HTTP by Floe's own Elasticsearch
//! client, as Floe's plans will drive it.

mod admin_apis;
mod bulk;
mod cache;
mod common;
mod data_path;
mod faults;
mod fs;
mod indices;
mod license;
mod mount;
mod s3;
mod s3_client;
mod secured;
mod voting;
