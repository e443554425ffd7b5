//! Elasticsearch's search semantics for Floe's simulated clusters, on the
//! tantivy search library: mappings as Elasticsearch makes them
//! ([`mapping`]), the query DSL ([`query`]), sorting, paging and totals
//! ([`search`]), and aggregations ([`aggs`]). What it does not implement
//! is refused with Elasticsearch's error ([`supported`]), never answered
//! differently.

pub mod aggs;
pub mod dates;
pub mod engine;
pub mod error;
pub mod mapping;
pub mod query;
pub mod search;
pub mod supported;

pub use engine::SearchIndex;
pub use error::{Phase, SearchError};
pub use mapping::{Indexed, Mappings};
pub use search::{Hit, Outcome, Request, Target};
