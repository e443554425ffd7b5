//! One index's documents in the search library: a schema built from the
//! mappings, writes that become searchable at the next refresh, and the
//! readers searches use.

use crate::error::SearchError;
use crate::mapping::{Indexed, Kind, Mappings};
use std::collections::BTreeMap;
use tantivy::schema::{
    DateOptions, DateTimePrecision, FAST, Field, INDEXED, IndexRecordOption, NumericOptions,
    STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{LowerCaser, SimpleTokenizer, TextAnalyzer};
use tantivy::{IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

/// The name Elasticsearch's default analyzer goes by; text fields use it.
pub const STANDARD: &str = "standard";

/// Holds every document's `_id` (indexed, and fast to read hits back).
pub const ID_FIELD: &str = "_id";

/// Holds the paths each document has a value for, as Elasticsearch's
/// `_field_names` does for `exists` queries.
pub const FIELD_NAMES: &str = "_field_names";

/// What indexing a batch may hold in memory before writing a segment.
const WRITER_MEMORY: usize = 32 * 1024 * 1024;

/// Elasticsearch's `standard` analyzer, as near as the library's parts
/// come: split on what is not a letter or digit, lowercase.
pub fn standard_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(LowerCaser)
        .build()
}

/// The words `text` analyses into.
pub fn analyze(text: &str) -> Vec<String> {
    let mut analyzer = standard_analyzer();
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

/// A leaf field in the schema.
#[derive(Debug, Clone, Copy)]
pub struct SchemaField {
    pub field: Field,
    pub kind: Kind,
}

/// An index's documents, searchable.
pub struct SearchIndex {
    index: tantivy::Index,
    reader: IndexReader,
    /// Opened at the first write, kept for the next.
    writer: Option<IndexWriter>,
    fields: BTreeMap<String, SchemaField>,
    id: Field,
    field_names: Field,
    /// Writes not yet searchable.
    dirty: bool,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("fields", &self.fields.keys().collect::<Vec<_>>())
            .field("dirty", &self.dirty)
            .finish_non_exhaustive()
    }
}

impl SearchIndex {
    /// An empty index whose schema holds every field of `mappings`, in
    /// memory or (with `dir`) on disk.
    pub fn create(
        mappings: &Mappings,
        dir: Option<&std::path::Path>,
    ) -> Result<SearchIndex, SearchError> {
        let mut builder = Schema::builder();
        let id = builder.add_text_field(ID_FIELD, STRING | FAST);
        let field_names = builder.add_text_field(FIELD_NAMES, STRING);
        let mut fields = BTreeMap::new();
        for leaf in mappings.leaves() {
            if !leaf.field.indexed {
                continue;
            }
            let kind = leaf.field.field_type.kind();
            let field = match kind {
                Kind::Text => {
                    let indexing = TextFieldIndexing::default()
                        .set_tokenizer(STANDARD)
                        .set_index_option(IndexRecordOption::WithFreqsAndPositions);
                    builder.add_text_field(
                        &leaf.path,
                        TextOptions::default().set_indexing_options(indexing),
                    )
                }
                Kind::Keyword => {
                    let indexing = TextFieldIndexing::default()
                        .set_tokenizer("raw")
                        .set_index_option(IndexRecordOption::WithFreqs);
                    let options = TextOptions::default()
                        .set_indexing_options(indexing)
                        .set_fast("raw");
                    builder.add_text_field(&leaf.path, options)
                }
                Kind::Long => builder.add_i64_field(&leaf.path, numeric()),
                Kind::Double => builder.add_f64_field(&leaf.path, numeric()),
                Kind::Boolean => builder.add_bool_field(&leaf.path, numeric()),
                Kind::Date => builder.add_date_field(
                    &leaf.path,
                    DateOptions::from(INDEXED)
                        .set_fast()
                        .set_precision(DateTimePrecision::Milliseconds),
                ),
            };
            fields.insert(leaf.path, SchemaField { field, kind });
        }
        let schema = builder.build();
        let index = match dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).map_err(SearchError::engine)?;
                tantivy::Index::create_in_dir(dir, schema)?
            }
            None => tantivy::Index::create_in_ram(schema),
        };
        index.tokenizers().register(STANDARD, standard_analyzer());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(SearchIndex {
            index,
            reader,
            writer: None,
            fields,
            id,
            field_names,
            dirty: false,
        })
    }

    /// Whether the schema has every indexed field of `mappings` (else the
    /// index must be built again, with the documents).
    pub fn covers(&self, mappings: &Mappings) -> bool {
        mappings
            .leaves()
            .iter()
            .filter(|l| l.field.indexed)
            .all(|l| {
                self.fields
                    .get(&l.path)
                    .is_some_and(|f| f.kind == l.field.field_type.kind())
            })
    }

    pub fn field(&self, path: &str) -> Option<SchemaField> {
        self.fields.get(path).copied()
    }

    pub fn fields(&self) -> &BTreeMap<String, SchemaField> {
        &self.fields
    }

    pub fn id_field(&self) -> Field {
        self.id
    }

    pub fn field_names_field(&self) -> Field {
        self.field_names
    }

    pub fn tantivy(&self) -> &tantivy::Index {
        &self.index
    }

    fn writer(&mut self) -> Result<&mut IndexWriter, SearchError> {
        if self.writer.is_none() {
            let writer = self.index.writer_with_num_threads(1, WRITER_MEMORY)?;
            self.writer = Some(writer);
        }
        self.writer
            .as_mut()
            .ok_or_else(|| SearchError::engine("the index writer did not open"))
    }

    /// Writes a document (replacing the one with its id).
    pub fn put(&mut self, id: &str, values: &[(String, Indexed)]) -> Result<(), SearchError> {
        let mut doc = TantivyDocument::default();
        doc.add_text(self.id, id);
        let mut named: Vec<&str> = Vec::new();
        for (path, value) in values {
            let Some(field) = self.fields.get(path) else {
                continue;
            };
            let f = field.field;
            match value {
                Indexed::Text(s) | Indexed::Keyword(s) => doc.add_text(f, s),
                Indexed::Long(n) => doc.add_i64(f, *n),
                Indexed::Double(n) => doc.add_f64(f, *n),
                Indexed::Boolean(b) => doc.add_bool(f, *b),
                Indexed::Date(ms) => doc.add_date(f, tantivy::DateTime::from_timestamp_millis(*ms)),
            }
            if !named.contains(&path.as_str()) {
                named.push(path);
            }
        }
        // Every object a value sits under exists too.
        let mut names: Vec<String> = Vec::new();
        for path in named {
            let mut at = 0;
            while let Some(dot) = path[at..].find('.') {
                names.push(path[..at + dot].to_string());
                at += dot + 1;
            }
            names.push(path.to_string());
        }
        names.sort();
        names.dedup();
        for name in names {
            doc.add_text(self.field_names, name);
        }
        let id_term = Term::from_field_text(self.id, id);
        let writer = self.writer()?;
        writer.delete_term(id_term);
        writer.add_document(doc)?;
        self.dirty = true;
        Ok(())
    }

    pub fn delete(&mut self, id: &str) -> Result<(), SearchError> {
        let id_term = Term::from_field_text(self.id, id);
        self.writer()?.delete_term(id_term);
        self.dirty = true;
        Ok(())
    }

    /// Makes every write so far searchable.
    pub fn refresh(&mut self) -> Result<(), SearchError> {
        if !self.dirty {
            return Ok(());
        }
        self.writer()?.commit()?;
        self.reader.reload()?;
        self.dirty = false;
        Ok(())
    }

    /// Merges the segments down to `max` at most.
    pub fn force_merge(&mut self, max: usize) -> Result<(), SearchError> {
        self.refresh()?;
        let ids = self.index.searchable_segment_ids()?;
        if ids.len() > max.max(1) {
            let writer = self.writer()?;
            writer.merge(&ids).wait()?;
            writer.commit()?;
            self.reader.reload()?;
        }
        Ok(())
    }

    /// Segments searchable now.
    pub fn segment_count(&self) -> usize {
        self.reader.searcher().segment_readers().len()
    }

    /// What searches read: the index as of the last refresh.
    pub fn searcher(&self) -> tantivy::Searcher {
        self.reader.searcher()
    }

    /// Whether writes wait for a refresh.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }
}

fn numeric() -> NumericOptions {
    NumericOptions::default().set_indexed().set_fast()
}
