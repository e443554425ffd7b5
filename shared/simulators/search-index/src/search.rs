//! A search over one or more indices: the query, the total, the sorted
//! page of hits and the aggregations, with Elasticsearch's rules.

use crate::aggs;
use crate::engine::{ID_FIELD, SearchIndex};
use crate::error::SearchError;
use crate::mapping::{Kind, Mappings};
use crate::query::{self, Context};
use serde_json::{Map, Value, json};
use std::cmp::Ordering;
use tantivy::collector::{Collector, Count, SegmentCollector, TopDocs};
use tantivy::columnar::{Column, StrColumn};
use tantivy::query::{AllQuery, Query};
use tantivy::{DocAddress, DocId, Score, SegmentOrdinal, SegmentReader};

/// One index a search reads.
pub struct Target<'a> {
    pub name: &'a str,
    pub index: &'a SearchIndex,
    pub mappings: &'a Mappings,
    /// A query every hit of this target must also match, scoring nothing:
    /// the filter of the alias the index was searched through.
    pub filter: Option<&'a Value>,
}

/// A search, read from a `_search` request.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub query: Option<Value>,
    pub from: usize,
    pub size: usize,
    pub sort: Option<Value>,
    pub search_after: Option<Vec<Value>>,
    /// Hits counted exactly up to this many; `None`: not counted.
    pub track_total_hits: Option<u64>,
    pub aggs: Option<Value>,
    pub track_scores: bool,
}

/// A hit: which target, which document, its score and sort values.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub target: usize,
    pub id: String,
    pub score: Option<f32>,
    pub sort: Option<Vec<Value>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Every match, counted exactly (the caller caps it as
    /// `track_total_hits` says).
    pub total: u64,
    pub hits: Vec<Hit>,
    pub max_score: Option<f32>,
    pub aggregations: Option<Value>,
}

/// What a sort clause orders by.
#[derive(Debug, Clone, PartialEq)]
enum SortKey {
    Score,
    Doc,
    Field {
        path: String,
        unmapped: Option<Kind>,
    },
}

#[derive(Debug, Clone, PartialEq)]
struct SortSpec {
    key: SortKey,
    desc: bool,
    missing_first: bool,
}

/// A document's value for a sort clause.
#[derive(Debug, Clone, PartialEq)]
enum SortValue {
    Missing,
    Long(i64),
    Double(f64),
    Str(String),
}

impl SortValue {
    fn cmp_present(&self, other: &SortValue) -> Ordering {
        match (self, other) {
            (SortValue::Long(a), SortValue::Long(b)) => a.cmp(b),
            (SortValue::Double(a), SortValue::Double(b)) => a.total_cmp(b),
            (SortValue::Long(a), SortValue::Double(b)) => (*a as f64).total_cmp(b),
            (SortValue::Double(a), SortValue::Long(b)) => a.total_cmp(&(*b as f64)),
            (SortValue::Str(a), SortValue::Str(b)) => a.cmp(b),
            _ => Ordering::Equal,
        }
    }

    fn to_json(&self) -> Value {
        match self {
            SortValue::Missing => Value::Null,
            SortValue::Long(n) => json!(n),
            SortValue::Double(n) => json!(n),
            SortValue::Str(s) => json!(s),
        }
    }

    fn from_json(value: &Value) -> SortValue {
        match value {
            Value::Null => SortValue::Missing,
            Value::Number(n) => match n.as_i64() {
                Some(i) => SortValue::Long(i),
                None => SortValue::Double(n.as_f64().unwrap_or(0.0)),
            },
            Value::String(s) => SortValue::Str(s.clone()),
            Value::Bool(b) => SortValue::Long(i64::from(*b)),
            other => SortValue::Str(other.to_string()),
        }
    }
}

fn compare(a: &[SortValue], b: &[SortValue], specs: &[SortSpec]) -> Ordering {
    for ((x, y), spec) in a.iter().zip(b).zip(specs) {
        let order = match (x, y) {
            (SortValue::Missing, SortValue::Missing) => Ordering::Equal,
            (SortValue::Missing, _) => {
                if spec.missing_first {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (_, SortValue::Missing) => {
                if spec.missing_first {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            _ => {
                let o = x.cmp_present(y);
                if spec.desc { o.reverse() } else { o }
            }
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

/// Reads `sort` in each of the shapes Elasticsearch takes.
fn parse_sort(sort: &Value, mappings: &[&Mappings]) -> Result<Vec<SortSpec>, SearchError> {
    let items: Vec<&Value> = match sort {
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    let mut specs = Vec::new();
    for item in items {
        let (name, params) = match item {
            Value::String(s) => (s.clone(), Map::new()),
            Value::Object(m) if m.len() == 1 => {
                let (name, value) = m
                    .iter()
                    .next()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .unwrap_or_default();
                match value {
                    Value::String(order) => {
                        let mut p = Map::new();
                        p.insert("order".into(), Value::String(order));
                        (name, p)
                    }
                    Value::Object(p) => (name, p),
                    other => {
                        return Err(SearchError::parsing(format!(
                            "[{name}] sort must be an order or an object, not {other}"
                        )));
                    }
                }
            }
            other => {
                return Err(SearchError::parsing(format!(
                    "malformed sort format, not {other}"
                )));
            }
        };
        for key in params.keys() {
            if !matches!(
                key.as_str(),
                "order" | "missing" | "unmapped_type" | "mode" | "format" | "numeric_type"
            ) {
                return Err(SearchError::parsing(format!(
                    "[field_sort] unknown field [{key}]"
                )));
            }
        }
        if let Some(mode) = params.get("mode").and_then(Value::as_str)
            && !matches!(mode, "min" | "max")
        {
            return Err(SearchError::unsupported("sort mode", mode));
        }
        let desc = match params.get("order").and_then(Value::as_str) {
            None => name == "_score",
            Some("asc") => false,
            Some("desc") => true,
            Some(other) => {
                return Err(SearchError::illegal_argument(format!(
                    "Unknown SortOrder [{other}]"
                )));
            }
        };
        let missing_first = match params.get("missing").and_then(Value::as_str) {
            None | Some("_last") => false,
            Some("_first") => true,
            Some(other) => return Err(SearchError::unsupported("sort missing value", other)),
        };
        let key = match name.as_str() {
            "_score" => SortKey::Score,
            "_doc" => SortKey::Doc,
            path => {
                let mapped = mappings.iter().find_map(|m| m.field(path));
                match mapped {
                    Some(f) if f.field_type.kind() == Kind::Text => {
                        return Err(SearchError::shard_argument(format!(
                            "Text fields are not optimised for operations that require per-document field data like aggregations and sorting, so these operations are disabled by default. Please use a keyword field instead. Alternatively, set fielddata=true on [{path}] in order to load field data by uninverting the inverted index. Note that this can use significant memory."
                        )));
                    }
                    Some(_) => SortKey::Field {
                        path: path.to_string(),
                        unmapped: None,
                    },
                    None => {
                        let Some(t) = params.get("unmapped_type").and_then(Value::as_str) else {
                            return Err(SearchError::query_shard(format!(
                                "No mapping found for [{path}] in order to sort on"
                            )));
                        };
                        let kind = match t {
                            "keyword" => Kind::Keyword,
                            "double" | "float" => Kind::Double,
                            "date" => Kind::Date,
                            "boolean" => Kind::Boolean,
                            _ => Kind::Long,
                        };
                        SortKey::Field {
                            path: path.to_string(),
                            unmapped: Some(kind),
                        }
                    }
                }
            }
        };
        specs.push(SortSpec {
            key,
            desc,
            missing_first,
        });
    }
    Ok(specs)
}

/// Reads one sort clause's values in a segment.
enum SortReader {
    Score,
    Doc(u64),
    Long(Column<i64>),
    Double(Column<f64>),
    Bool(Column<bool>),
    Date(Column<tantivy::DateTime>),
    Str(StrColumn),
    None,
}

impl SortReader {
    fn open(
        spec: &SortSpec,
        index: &SearchIndex,
        reader: &SegmentReader,
        base: u64,
    ) -> tantivy::Result<SortReader> {
        let SortKey::Field { path, .. } = &spec.key else {
            return Ok(match spec.key {
                SortKey::Score => SortReader::Score,
                _ => SortReader::Doc(base),
            });
        };
        let Some(field) = index.field(path) else {
            return Ok(SortReader::None);
        };
        let ff = reader.fast_fields();
        Ok(match field.kind {
            Kind::Long => ff
                .column_opt::<i64>(path)?
                .map_or(SortReader::None, SortReader::Long),
            Kind::Double => ff
                .column_opt::<f64>(path)?
                .map_or(SortReader::None, SortReader::Double),
            Kind::Boolean => ff
                .column_opt::<bool>(path)?
                .map_or(SortReader::None, SortReader::Bool),
            Kind::Date => ff
                .column_opt::<tantivy::DateTime>(path)?
                .map_or(SortReader::None, SortReader::Date),
            Kind::Keyword => ff.str(path)?.map_or(SortReader::None, SortReader::Str),
            Kind::Text => SortReader::None,
        })
    }

    /// The value a document sorts by: of several, the least ascending and
    /// the greatest descending (Elasticsearch's default `mode`).
    fn value(&self, doc: DocId, score: Score, desc: bool) -> SortValue {
        fn pick<T: PartialOrd + Copy>(values: impl Iterator<Item = T>, desc: bool) -> Option<T> {
            values.fold(None, |best, v| match best {
                None => Some(v),
                Some(b) if (desc && v > b) || (!desc && v < b) => Some(v),
                keep => keep,
            })
        }
        match self {
            SortReader::Score => SortValue::Double(f64::from(score)),
            SortReader::Doc(base) => {
                SortValue::Long(i64::try_from(base + u64::from(doc)).unwrap_or(i64::MAX))
            }
            SortReader::Long(c) => {
                pick(c.values_for_doc(doc), desc).map_or(SortValue::Missing, SortValue::Long)
            }
            SortReader::Double(c) => {
                pick(c.values_for_doc(doc), desc).map_or(SortValue::Missing, SortValue::Double)
            }
            SortReader::Bool(c) => pick(c.values_for_doc(doc).map(i64::from), desc)
                .map_or(SortValue::Missing, SortValue::Long),
            SortReader::Date(c) => pick(
                c.values_for_doc(doc).map(|d| d.into_timestamp_millis()),
                desc,
            )
            .map_or(SortValue::Missing, SortValue::Long),
            SortReader::Str(c) => {
                let ord = pick(c.term_ords(doc), desc);
                let mut s = String::new();
                match ord {
                    Some(o) if c.ord_to_str(o, &mut s).unwrap_or(false) => SortValue::Str(s),
                    _ => SortValue::Missing,
                }
            }
            SortReader::None => SortValue::Missing,
        }
    }
}

/// A hit of the page before its id is read: target, document, score and
/// sort values.
type PageEntry = (usize, DocAddress, Option<f32>, Option<Vec<Value>>);

/// A matching document and what it sorts by.
struct Row {
    keys: Vec<SortValue>,
    score: Score,
    doc: DocAddress,
}

/// Collects every match with its sort values.
struct SortCollector<'a> {
    specs: &'a [SortSpec],
    index: &'a SearchIndex,
    scoring: bool,
    /// Document numbers of the segments before each one (for `_doc`).
    bases: Vec<u64>,
}

struct SortSegment {
    readers: Vec<(SortReader, bool)>,
    segment: SegmentOrdinal,
    rows: Vec<Row>,
}

impl SegmentCollector for SortSegment {
    type Fruit = Vec<Row>;

    fn collect(&mut self, doc: DocId, score: Score) {
        let keys = self
            .readers
            .iter()
            .map(|(r, desc)| r.value(doc, score, *desc))
            .collect();
        self.rows.push(Row {
            keys,
            score,
            doc: DocAddress::new(self.segment, doc),
        });
    }

    fn harvest(self) -> Vec<Row> {
        self.rows
    }
}

impl Collector for SortCollector<'_> {
    type Fruit = Vec<Row>;
    type Child = SortSegment;

    fn for_segment(
        &self,
        segment: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> tantivy::Result<SortSegment> {
        let base = self.bases.get(segment as usize).copied().unwrap_or(0);
        let readers = self
            .specs
            .iter()
            .map(|s| Ok((SortReader::open(s, self.index, reader, base)?, s.desc)))
            .collect::<tantivy::Result<Vec<_>>>()?;
        Ok(SortSegment {
            readers,
            segment,
            rows: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        self.scoring
    }

    fn merge_fruits(&self, fruits: Vec<Vec<Row>>) -> tantivy::Result<Vec<Row>> {
        Ok(fruits.into_iter().flatten().collect())
    }
}

fn compile(
    target: &Target<'_>,
    query: Option<&Value>,
    now_millis: i64,
) -> Result<Box<dyn Query>, SearchError> {
    let context = Context {
        index: target.index,
        mappings: target.mappings,
        now_millis,
    };
    match (query, target.filter) {
        (None, None) => Ok(Box::new(AllQuery)),
        (Some(q), None) => query::compile(q, &context),
        (q, Some(filter)) => {
            let must = q
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"match_all": {}}));
            query::compile(
                &serde_json::json!({"bool": {"must": [must], "filter": [filter]}}),
                &context,
            )
        }
    }
}

/// How many documents of the targets match.
pub fn count(
    targets: &[Target<'_>],
    query: Option<&Value>,
    now_millis: i64,
) -> Result<u64, SearchError> {
    let mut total = 0u64;
    for target in targets {
        let q = compile(target, query, now_millis)?;
        total += target.index.searcher().search(&*q, &Count)? as u64;
    }
    Ok(total)
}

/// The ids of every matching document of one target.
pub fn matching_ids(
    target: &Target<'_>,
    query: Option<&Value>,
    now_millis: i64,
) -> Result<Vec<String>, SearchError> {
    let q = compile(target, query, now_millis)?;
    let searcher = target.index.searcher();
    let docs = searcher.search(&*q, &tantivy::collector::DocSetCollector)?;
    let mut docs: Vec<DocAddress> = docs.into_iter().collect();
    docs.sort();
    ids_of(target.index, &searcher, &docs)
}

/// The `_id`s of documents, read from their fast field.
fn ids_of(
    index: &SearchIndex,
    searcher: &tantivy::Searcher,
    docs: &[DocAddress],
) -> Result<Vec<String>, SearchError> {
    let mut columns: Vec<Option<StrColumn>> = Vec::new();
    for segment in searcher.segment_readers() {
        columns.push(segment.fast_fields().str(ID_FIELD)?);
    }
    let _ = index;
    let mut out = Vec::with_capacity(docs.len());
    for doc in docs {
        let mut id = String::new();
        if let Some(Some(column)) = columns.get(doc.segment_ord as usize)
            && let Some(ord) = column.term_ords(doc.doc_id).next()
        {
            column
                .ord_to_str(ord, &mut id)
                .map_err(SearchError::engine)?;
        }
        out.push(id);
    }
    Ok(out)
}

/// Runs a search over `targets`.
pub fn search(
    targets: &[Target<'_>],
    request: &Request,
    now_millis: i64,
) -> Result<Outcome, SearchError> {
    let mappings: Vec<&Mappings> = targets.iter().map(|t| t.mappings).collect();
    let specs = match (&request.sort, &request.search_after) {
        (Some(sort), _) => parse_sort(sort, &mappings)?,
        (None, Some(_)) => vec![SortSpec {
            key: SortKey::Score,
            desc: true,
            missing_first: false,
        }],
        (None, None) => Vec::new(),
    };
    if let Some(after) = &request.search_after {
        if after.len() != specs.len() {
            return Err(SearchError::illegal_argument(format!(
                "search_after has {} value(s) but sort has {}.",
                after.len(),
                specs.len()
            )));
        }
        if request.from > 0 {
            return Err(SearchError::illegal_argument(
                "[from] parameter must be set to 0 when [search_after] is used",
            ));
        }
    }
    let prepared = match &request.aggs {
        Some(a) => Some(aggs::prepare(a, &mappings)?),
        None => None,
    };
    let wanted = request.from.saturating_add(request.size);
    let by_score = specs.is_empty();
    let scoring = by_score || request.track_scores || specs.iter().any(|s| s.key == SortKey::Score);
    let mut total = 0u64;
    let mut scored: Vec<(Score, usize, DocAddress)> = Vec::new();
    let mut rows: Vec<(usize, Row)> = Vec::new();
    let mut agg_parts = Vec::new();
    let mut searchers = Vec::new();
    for (t, target) in targets.iter().enumerate() {
        let q = compile(target, request.query.as_ref(), now_millis)?;
        let searcher = target.index.searcher();
        total += searcher.search(&*q, &Count)? as u64;
        if by_score {
            if wanted > 0 {
                let top = searcher.search(&*q, &TopDocs::with_limit(wanted).order_by_score())?;
                scored.extend(top.into_iter().map(|(s, d)| (s, t, d)));
            }
        } else {
            let mut bases = Vec::new();
            let mut base = 0u64;
            for segment in searcher.segment_readers() {
                bases.push(base);
                base += u64::from(segment.max_doc());
            }
            let collector = SortCollector {
                specs: &specs,
                index: target.index,
                scoring,
                bases,
            };
            let found = searcher.search(&*q, &collector)?;
            rows.extend(found.into_iter().map(|r| (t, r)));
        }
        if let Some((agg_request, _)) = &prepared {
            agg_parts.push(aggs::collect(agg_request, &*q, target.index)?);
        }
        searchers.push(searcher);
    }
    let mut page: Vec<PageEntry> = Vec::new();
    let mut max_score = None;
    if by_score {
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        max_score = scored.first().map(|s| s.0);
        for (score, t, doc) in scored.into_iter().skip(request.from).take(request.size) {
            page.push((t, doc, Some(score), None));
        }
    } else {
        if scoring {
            max_score = rows.iter().map(|(_, r)| r.score).reduce(f32::max);
        }
        if let Some(after) = &request.search_after {
            let after: Vec<SortValue> = after.iter().map(SortValue::from_json).collect();
            rows.retain(|(_, r)| compare(&r.keys, &after, &specs) == Ordering::Greater);
        }
        let order = |a: &(usize, Row), b: &(usize, Row)| {
            compare(&a.1.keys, &b.1.keys, &specs)
                .then(a.0.cmp(&b.0))
                .then(a.1.doc.cmp(&b.1.doc))
        };
        if wanted < rows.len() && wanted > 0 {
            rows.select_nth_unstable_by(wanted - 1, order);
            rows.truncate(wanted);
        }
        rows.sort_by(order);
        for (t, row) in rows.into_iter().skip(request.from).take(request.size) {
            let sort = row.keys.iter().map(SortValue::to_json).collect();
            let score = if scoring { Some(row.score) } else { None };
            page.push((t, row.doc, score, Some(sort)));
        }
    }
    let mut hits = Vec::with_capacity(page.len());
    for (t, doc, score, sort) in page {
        let (Some(target), Some(searcher)) = (targets.get(t), searchers.get(t)) else {
            continue;
        };
        let id = ids_of(target.index, searcher, &[doc])?
            .pop()
            .unwrap_or_default();
        hits.push(Hit {
            target: t,
            id,
            score,
            sort,
        });
    }
    let aggregations = match prepared {
        Some((agg_request, plan)) => Some(aggs::finish(&agg_request, &plan, agg_parts)?),
        None => None,
    };
    Ok(Outcome {
        total,
        hits,
        max_score,
        aggregations,
    })
}

/// `_source` filtering: `false`, a pattern or patterns, or
/// `{"includes": …, "excludes": …}`; `None` when no source is returned.
pub fn filter_source(source: &Value, filter: &Value) -> Option<Value> {
    let patterns = |v: Option<&Value>| -> Vec<String> {
        match v {
            Some(Value::String(s)) => s
                .split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        }
    };
    let (includes, excludes) = match filter {
        Value::Bool(false) => return None,
        Value::Bool(true) | Value::Null => return Some(source.clone()),
        Value::Object(m) => (
            patterns(m.get("includes").or_else(|| m.get("include"))),
            patterns(m.get("excludes").or_else(|| m.get("exclude"))),
        ),
        other => (patterns(Some(other)), Vec::new()),
    };
    Some(filter_object(source, "", &includes, &excludes))
}

fn filter_object(value: &Value, prefix: &str, includes: &[String], excludes: &[String]) -> Value {
    let Value::Object(map) = value else {
        return value.clone();
    };
    let mut out = Map::new();
    for (key, child) in map {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        if excludes.iter().any(|p| path_glob(p, &path)) {
            continue;
        }
        let included = includes.is_empty() || includes.iter().any(|p| path_glob(p, &path));
        let leads_to = includes
            .iter()
            .any(|p| p.starts_with(&format!("{path}.")) || p.contains('*'));
        if included && excludes.is_empty() {
            out.insert(key.clone(), child.clone());
        } else if included || (leads_to && child.is_object()) {
            let filtered = if included {
                filter_object(child, &path, &[], excludes)
            } else {
                filter_object(child, &path, includes, excludes)
            };
            if included || filtered.as_object().is_some_and(|m| !m.is_empty()) {
                out.insert(key.clone(), filtered);
            }
        }
    }
    Value::Object(out)
}

fn path_glob(pattern: &str, path: &str) -> bool {
    fn glob(p: &[u8], t: &[u8]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some(b'*'), _) => glob(&p[1..], t) || (!t.is_empty() && glob(p, &t[1..])),
            (Some(a), Some(b)) if a == b => glob(&p[1..], &t[1..]),
            _ => false,
        }
    }
    glob(pattern.as_bytes(), path.as_bytes())
}
