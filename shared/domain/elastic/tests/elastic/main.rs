//! The client against a stand-in Elasticsearch on loopback: what goes out on
//! the wire, and how each documented answer comes back.

mod common;
mod health;
mod repositories;
mod restore;
mod snapshots;
mod transport;
