//! What the simulated cluster's searches understand, in one table. A
//! query or aggregation type outside it is refused with Elasticsearch's
//! parsing error, never answered approximately.

/// Query types, each with Elasticsearch's parameters (a parameter a query
/// does not take, or one not implemented, is refused the same way).
pub const QUERY_TYPES: &[&str] = &[
    "match_all",
    "match_none",
    "match",
    "match_phrase",
    "multi_match",
    "term",
    "terms",
    "range",
    "exists",
    "ids",
    "prefix",
    "wildcard",
    "bool",
    "query_string",
    "constant_score",
];

/// Aggregation types, run by the search library's aggregations (whose
/// requests and answers follow Elasticsearch's), sub-aggregations
/// included.
pub const AGGREGATION_TYPES: &[&str] = &[
    "terms",
    "histogram",
    "date_histogram",
    "range",
    "avg",
    "min",
    "max",
    "sum",
    "stats",
    "extended_stats",
    "value_count",
    "cardinality",
    "percentiles",
];

/// Keys of a `_search` body.
pub const SEARCH_BODY_KEYS: &[&str] = &[
    "query",
    "from",
    "size",
    "sort",
    "search_after",
    "track_total_hits",
    "track_scores",
    "_source",
    "aggs",
    "aggregations",
    "pit",
    "version",
    "seq_no_primary_term",
    "timeout",
];

/// Keys of a `_count` body.
pub const COUNT_BODY_KEYS: &[&str] = &["query"];
