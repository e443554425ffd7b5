//! The search semantics end to end on the library: documents in, the
//! answers Elasticsearch gives out.

use floe_search_index::search::{self, Request, Target, filter_source};
use floe_search_index::{Mappings, SearchIndex};
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;
type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

struct Fixture {
    mappings: Mappings,
    index: SearchIndex,
}

impl Fixture {
    /// `n` documents: `n` counts up, `msg` says even or odd, `cat` cycles
    /// alpha, beta, gamma, `ts` is a day per document from 2024-01-01.
    fn new(n: i64) -> Fallible<Fixture> {
        let mut mappings = Mappings::default();
        let mut docs = Vec::new();
        for i in 0..n {
            let cat = ["alpha", "beta", "gamma"][(i % 3) as usize];
            let doc = json!({
                "n": i,
                "msg": if i % 2 == 0 { format!("number {i} is even") } else { format!("number {i} is odd") },
                "cat": cat,
                "price": (i as f64) * 1.5,
                "ts": format!("2024-01-{:02}T00:00:00Z", (i % 28) + 1),
                "flag": i % 4 == 0,
            });
            mappings.map_dynamically(&doc)?;
            docs.push((i.to_string(), doc));
        }
        let mut index = SearchIndex::create(&mappings, None)?;
        for (id, doc) in &docs {
            index.put(id, &mappings.values(id, doc)?)?;
        }
        index.refresh()?;
        Ok(Fixture { mappings, index })
    }

    fn run(&self, body: Value) -> search::Outcome {
        self.try_run(body).expect("the search runs")
    }

    fn try_run(&self, body: Value) -> Result<search::Outcome, floe_search_index::SearchError> {
        let request = Request {
            query: body.get("query").cloned(),
            from: body.get("from").and_then(Value::as_u64).unwrap_or(0) as usize,
            size: body.get("size").and_then(Value::as_u64).unwrap_or(10) as usize,
            sort: body.get("sort").cloned(),
            search_after: body.get("search_after").and_then(Value::as_array).cloned(),
            track_total_hits: Some(u64::MAX),
            aggs: body.get("aggs").cloned(),
            track_scores: false,
        };
        let target = Target {
            name: "i",
            index: &self.index,
            mappings: &self.mappings,
            filter: None,
        };
        search::search(&[target], &request, 0)
    }

    fn total(&self, query: Value) -> u64 {
        self.run(json!({"query": query, "size": 0})).total
    }
}

#[test]
fn queries_match_what_elasticsearch_matches() -> TestResult {
    let f = Fixture::new(200)?;
    assert_eq!(f.total(json!({"match_all": {}})), 200);
    assert_eq!(f.total(json!({"match": {"msg": "even"}})), 100);
    assert_eq!(
        f.total(json!({"match": {"msg": "EVEN odd"}})),
        200,
        "or by default"
    );
    assert_eq!(
        f.total(json!({"match": {"msg": {"query": "even odd", "operator": "and"}}})),
        0
    );
    assert_eq!(f.total(json!({"match_phrase": {"msg": "is even"}})), 100);
    assert_eq!(f.total(json!({"match_phrase": {"msg": "even is"}})), 0);
    assert_eq!(f.total(json!({"term": {"cat.keyword": "beta"}})), 67);
    assert_eq!(
        f.total(json!({"term": {"cat": "Beta"}})),
        0,
        "a term is not analysed"
    );
    assert_eq!(
        f.total(json!({"terms": {"cat.keyword": ["alpha", "gamma"]}})),
        133
    );
    assert_eq!(f.total(json!({"range": {"n": {"gte": 10, "lt": 20}}})), 10);
    assert_eq!(f.total(json!({"range": {"n": {"gt": 9.5}}})), 190);
    assert_eq!(f.total(json!({"range": {"price": {"lte": 15.0}}})), 11);
    assert_eq!(f.total(json!({"range": {"ts": {"gte": "2024-01-27"}}})), 14);
    assert_eq!(
        f.total(json!({"range": {"ts": {"lte": "2024-01-01||/d"}}})),
        8
    );
    assert_eq!(f.total(json!({"exists": {"field": "cat"}})), 200);
    assert_eq!(f.total(json!({"exists": {"field": "nope"}})), 0);
    assert_eq!(f.total(json!({"ids": {"values": ["1", "2", "zz"]}})), 2);
    assert_eq!(f.total(json!({"prefix": {"cat.keyword": "gam"}})), 66);
    assert_eq!(f.total(json!({"wildcard": {"cat.keyword": "?eta"}})), 67);
    assert_eq!(f.total(json!({"term": {"flag": true}})), 50);
    assert_eq!(
        f.total(json!({"bool": {
            "must": [{"match": {"msg": "even"}}],
            "filter": [{"term": {"cat.keyword": "alpha"}}],
            "must_not": [{"range": {"n": {"lt": 100}}}]
        }})),
        17
    );
    assert_eq!(
        f.total(json!({"bool": {"should": [{"term": {"n": 1}}, {"term": {"n": 2}}]}})),
        2
    );
    assert_eq!(
        f.total(json!({"bool": {"must_not": [{"term": {"n": 1}}]}})),
        199
    );
    assert_eq!(
        f.total(json!({"multi_match": {"query": "beta", "fields": ["msg", "cat"]}})),
        67
    );
    assert_eq!(
        f.total(json!({"query_string": {"query": "msg:even AND cat.keyword:alpha"}})),
        34
    );
    assert_eq!(f.total(json!({"term": {"unmapped": "x"}})), 0);
    Ok(())
}

#[test]
fn sort_page_and_search_after() -> TestResult {
    let f = Fixture::new(30)?;
    let hits = |o: &search::Outcome| o.hits.iter().map(|h| h.id.clone()).collect::<Vec<_>>();
    let o =
        f.run(json!({"query": {"range": {"n": {"lt": 10}}}, "sort": [{"n": "desc"}], "size": 3}));
    assert_eq!(hits(&o), ["9", "8", "7"]);
    assert_eq!(o.hits[0].sort, Some(vec![json!(9)]));
    assert_eq!(o.hits[0].score, None);
    let o = f.run(
        json!({"sort": [{"cat.keyword": "asc"}, {"n": {"order": "desc"}}], "size": 2, "from": 1}),
    );
    assert_eq!(hits(&o), ["24", "21"]);
    let o = f.run(json!({"sort": [{"n": "asc"}], "size": 2, "search_after": [27]}));
    assert_eq!(hits(&o), ["28", "29"]);
    let o = f.run(json!({"sort": ["ts", {"n": "asc"}], "size": 1}));
    assert_eq!(
        o.hits[0].sort,
        Some(vec![json!(1_704_067_200_000_i64), json!(0)])
    );
    let e = f
        .try_run(json!({"sort": ["msg"]}))
        .err()
        .ok_or("expected an error")?;
    assert_eq!(e.error_type, "illegal_argument_exception");
    let e = f
        .try_run(json!({"sort": ["nope"]}))
        .err()
        .ok_or("expected an error")?;
    assert!(e.reason.contains("No mapping found for [nope]"), "{e}");
    let o = f.run(json!({"query": {"match": {"msg": "even"}}, "size": 100}));
    assert_eq!(o.hits.len(), 15);
    assert!(o.max_score.is_some_and(|s| s > 0.0));
    Ok(())
}

#[test]
fn aggregations_answer_in_elasticsearch_shapes() -> TestResult {
    let f = Fixture::new(90)?;
    let o = f.run(json!({"size": 0, "aggs": {
        "cats": {"terms": {"field": "cat.keyword"}, "aggs": {"top": {"max": {"field": "n"}}}},
        "hist": {"histogram": {"field": "n", "interval": 30}},
        "days": {"date_histogram": {"field": "ts", "calendar_interval": "day"}},
        "ranges": {"range": {"field": "n", "ranges": [{"to": 10}, {"from": 10}]}},
        "avg_n": {"avg": {"field": "n"}},
        "sum_n": {"sum": {"field": "n"}},
        "min_n": {"min": {"field": "n"}},
        "stats_n": {"stats": {"field": "n"}},
        "count_n": {"value_count": {"field": "n"}},
        "distinct": {"cardinality": {"field": "cat.keyword"}},
        "flags": {"terms": {"field": "flag"}}
    }}));
    let a = o.aggregations.ok_or("no aggregations")?;
    assert_eq!(
        a["cats"]["buckets"][0],
        json!({"key": "alpha", "doc_count": 30, "top": {"value": 87.0}})
    );
    assert_eq!(a["cats"]["sum_other_doc_count"], json!(0));
    assert_eq!(a["cats"]["doc_count_error_upper_bound"], json!(0));
    assert_eq!(
        a["hist"]["buckets"],
        json!([
            {"key": 0.0, "doc_count": 30}, {"key": 30.0, "doc_count": 30}, {"key": 60.0, "doc_count": 30}
        ])
    );
    assert_eq!(
        a["days"]["buckets"][0],
        json!({"key": 1_704_067_200_000_i64, "key_as_string": "2024-01-01T00:00:00.000Z", "doc_count": 4})
    );
    assert_eq!(
        a["days"]["buckets"].as_array().ok_or("not an array")?.len(),
        28
    );
    assert_eq!(a["ranges"]["buckets"][0]["doc_count"], json!(10));
    assert_eq!(a["avg_n"], json!({"value": 44.5}));
    assert_eq!(a["sum_n"], json!({"value": 4005.0}));
    assert_eq!(a["min_n"], json!({"value": 0.0}));
    assert_eq!(
        a["stats_n"],
        json!({"count": 90, "min": 0.0, "max": 89.0, "avg": 44.5, "sum": 4005.0})
    );
    assert_eq!(a["count_n"], json!({"value": 90}));
    assert_eq!(a["distinct"], json!({"value": 3}));
    assert_eq!(
        a["flags"]["buckets"][1],
        json!({"key": 1, "key_as_string": "true", "doc_count": 23})
    );
    Ok(())
}

#[test]
fn what_is_not_implemented_is_refused_as_elasticsearch_refuses() -> TestResult {
    let f = Fixture::new(10)?;
    let e = f
        .try_run(json!({"query": {"fuzzy": {"msg": "evn"}}}))
        .err()
        .ok_or("expected an error")?;
    assert_eq!(e.error_type, "parsing_exception");
    assert!(e.reason.contains("[fuzzy]"), "{e}");
    let e = f
        .try_run(json!({"aggs": {"g": {"geo_bounds": {"field": "x"}}}}))
        .err()
        .ok_or("expected an error")?;
    assert_eq!(e.error_type, "parsing_exception");
    let e = f
        .try_run(json!({"aggs": {"t": {"terms": {"field": "msg"}}}}))
        .err()
        .ok_or("expected an error")?;
    assert!(
        e.reason.starts_with("Fielddata is disabled on [msg]"),
        "{e}"
    );
    let e = f
        .try_run(json!({"query": {"match": {"msg": {"query": "x", "fuzziness": 2}}}}))
        .err()
        .ok_or("expected an error")?;
    assert_eq!(e.reason, "[match] query does not support [fuzziness]");
    let e = f
        .try_run(json!({"query": {"term": {"n": "abc"}}}))
        .err()
        .ok_or("expected an error")?;
    assert_eq!(e.error_type, "query_shard_exception");
    Ok(())
}

#[test]
fn deletes_and_updates_show_after_a_refresh() -> TestResult {
    let mut f = Fixture::new(10)?;
    f.index.delete("1")?;
    let doc = json!({"n": 100, "cat": "alpha"});
    let values = f.mappings.values("2", &doc)?;
    f.index.put("2", &values)?;
    assert_eq!(f.total(json!({"match_all": {}})), 10, "not yet refreshed");
    f.index.refresh()?;
    assert_eq!(f.total(json!({"match_all": {}})), 9);
    assert_eq!(f.total(json!({"term": {"n": 100}})), 1);
    assert_eq!(f.total(json!({"term": {"n": 2}})), 0);
    Ok(())
}

#[test]
fn source_filtering() -> TestResult {
    let source = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": "x"});
    assert_eq!(filter_source(&source, &json!(false)), None);
    assert_eq!(
        filter_source(&source, &json!("b.c")),
        Some(json!({"b": {"c": 2}}))
    );
    assert_eq!(
        filter_source(&source, &json!(["a", "e"])),
        Some(json!({"a": 1, "e": "x"}))
    );
    assert_eq!(
        filter_source(&source, &json!({"excludes": ["b.d"]})),
        Some(json!({"a": 1, "b": {"c": 2}, "e": "x"}))
    );
    assert_eq!(
        filter_source(&source, &json!({"includes": ["b*"], "excludes": ["*.d"]})),
        Some(json!({"b": {"c": 2}}))
    );
    Ok(())
}
