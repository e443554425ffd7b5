//! Mappings as Elasticsearch keeps them: explicit ones from a create or
//! a `PUT _mapping`, dynamic ones from the documents themselves, and the
//! values each document gives each field.

use crate::dates;
use crate::error::SearchError;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The field types the simulated cluster indexes. Each is searched,
/// sorted and aggregated as Elasticsearch does for that type; any other
/// type is refused when a mapping names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    Text,
    Keyword,
    Long,
    Integer,
    Short,
    Byte,
    Double,
    Float,
    HalfFloat,
    ScaledFloat,
    Date,
    Boolean,
}

/// The types a mapping may name.
pub const FIELD_TYPES: &[&str] = &[
    "text",
    "keyword",
    "long",
    "integer",
    "short",
    "byte",
    "double",
    "float",
    "half_float",
    "scaled_float",
    "date",
    "boolean",
    "object",
];

impl FieldType {
    fn parse(name: &str) -> Option<FieldType> {
        Some(match name {
            "text" => FieldType::Text,
            "keyword" => FieldType::Keyword,
            "long" => FieldType::Long,
            "integer" => FieldType::Integer,
            "short" => FieldType::Short,
            "byte" => FieldType::Byte,
            "double" => FieldType::Double,
            "float" => FieldType::Float,
            "half_float" => FieldType::HalfFloat,
            "scaled_float" => FieldType::ScaledFloat,
            "date" => FieldType::Date,
            "boolean" => FieldType::Boolean,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            FieldType::Text => "text",
            FieldType::Keyword => "keyword",
            FieldType::Long => "long",
            FieldType::Integer => "integer",
            FieldType::Short => "short",
            FieldType::Byte => "byte",
            FieldType::Double => "double",
            FieldType::Float => "float",
            FieldType::HalfFloat => "half_float",
            FieldType::ScaledFloat => "scaled_float",
            FieldType::Date => "date",
            FieldType::Boolean => "boolean",
        }
    }

    /// How the search library holds the type.
    pub fn kind(self) -> Kind {
        match self {
            FieldType::Text => Kind::Text,
            FieldType::Keyword => Kind::Keyword,
            FieldType::Long | FieldType::Integer | FieldType::Short | FieldType::Byte => Kind::Long,
            FieldType::Double
            | FieldType::Float
            | FieldType::HalfFloat
            | FieldType::ScaledFloat => Kind::Double,
            FieldType::Date => Kind::Date,
            FieldType::Boolean => Kind::Boolean,
        }
    }

    /// The range a whole-number type takes.
    fn bounds(self) -> Option<(i64, i64)> {
        match self {
            FieldType::Integer => Some((i64::from(i32::MIN), i64::from(i32::MAX))),
            FieldType::Short => Some((i64::from(i16::MIN), i64::from(i16::MAX))),
            FieldType::Byte => Some((i64::from(i8::MIN), i64::from(i8::MAX))),
            FieldType::Long => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }
}

/// The families of field the search library indexes differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Analysed into lowercase words, with positions (phrases).
    Text,
    /// One exact term; sortable and aggregatable.
    Keyword,
    Long,
    Double,
    /// Milliseconds since the epoch, UTC.
    Date,
    Boolean,
}

/// A leaf field (or a multi-field under one): its type and the
/// parameters the simulated cluster reads; the rest of its mapping is
/// kept as given, so that `GET _mapping` shows it back.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub field_type: FieldType,
    /// `ignore_above` of a keyword: longer strings are kept in the
    /// source but not indexed.
    pub ignore_above: Option<usize>,
    /// A date's format (`||`-separated).
    pub format: Option<String>,
    /// `scaling_factor` of a scaled float.
    pub scaling_factor: Option<f64>,
    /// `index: false`: kept, not searchable.
    pub indexed: bool,
    /// Parameters as given, for `GET _mapping`.
    pub params: Map<String, Value>,
    /// Multi-fields (`fields`), e.g. a text field's `keyword`.
    pub fields: BTreeMap<String, Field>,
}

impl Field {
    fn of(field_type: FieldType) -> Field {
        Field {
            field_type,
            ignore_above: None,
            format: None,
            scaling_factor: None,
            indexed: true,
            params: Map::new(),
            fields: BTreeMap::new(),
        }
    }

    /// What dynamic mapping makes of a string: `text` with a `keyword`
    /// sub-field that ignores strings over 256 characters.
    fn dynamic_string() -> Field {
        let mut keyword = Field::of(FieldType::Keyword);
        keyword.ignore_above = Some(256);
        keyword.params.insert("ignore_above".into(), json!(256));
        let mut text = Field::of(FieldType::Text);
        text.fields.insert("keyword".into(), keyword);
        text
    }

    pub fn date_format(&self) -> &str {
        self.format.as_deref().unwrap_or(dates::DEFAULT_FORMAT)
    }

    fn parse(path: &str, mapping: &Map<String, Value>, top: bool) -> Result<Field, SearchError> {
        let type_name = mapping
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("object");
        let field_type = FieldType::parse(type_name).ok_or_else(|| {
            SearchError::mapper_parsing(format!(
                "Failed to parse mapping: No handler for type [{type_name}] declared on field [{path}] (Floe's simulated Elasticsearch maps {})",
                FIELD_TYPES.join(", ")
            ))
        })?;
        let mut field = Field::of(field_type);
        for (key, value) in mapping {
            match key.as_str() {
                "type" => {}
                "fields" if top => {
                    let Value::Object(subs) = value else {
                        return Err(SearchError::mapper_parsing(format!(
                            "Failed to parse mapping: [fields] of [{path}] must be an object"
                        )));
                    };
                    for (name, sub) in subs {
                        let Value::Object(sub) = sub else {
                            return Err(SearchError::mapper_parsing(format!(
                                "Failed to parse mapping: expected map for property [fields] on field [{name}] but got a {}",
                                type_word(sub)
                            )));
                        };
                        let sub_path = format!("{path}.{name}");
                        field
                            .fields
                            .insert(name.clone(), Field::parse(&sub_path, sub, false)?);
                    }
                }
                "ignore_above" if field_type == FieldType::Keyword => {
                    let n = value.as_u64().and_then(|n| usize::try_from(n).ok()).ok_or_else(|| {
                        SearchError::mapper_parsing(format!(
                            "Failed to parse mapping: [ignore_above] of [{path}] must be a positive integer"
                        ))
                    })?;
                    field.ignore_above = Some(n);
                    field.params.insert(key.clone(), value.clone());
                }
                "format" if field_type == FieldType::Date => {
                    let format = value.as_str().ok_or_else(|| {
                        SearchError::mapper_parsing(format!(
                            "Failed to parse mapping: [format] of [{path}] must be a string"
                        ))
                    })?;
                    dates::check_format(format, path)?;
                    field.format = Some(format.to_string());
                    field.params.insert(key.clone(), value.clone());
                }
                "scaling_factor" if field_type == FieldType::ScaledFloat => {
                    let factor = value.as_f64().filter(|f| *f > 0.0).ok_or_else(|| {
                        SearchError::mapper_parsing(format!(
                            "Failed to parse mapping: [scaling_factor] of [{path}] must be a positive number"
                        ))
                    })?;
                    field.scaling_factor = Some(factor);
                    field.params.insert(key.clone(), value.clone());
                }
                "index" => {
                    field.indexed = value.as_bool().ok_or_else(|| {
                        SearchError::mapper_parsing(format!(
                            "Failed to parse mapping: [index] of [{path}] must be a boolean"
                        ))
                    })?;
                    field.params.insert(key.clone(), value.clone());
                }
                // Parameters that change nothing the simulated cluster
                // answers: kept and shown back.
                "doc_values"
                | "store"
                | "norms"
                | "null_value"
                | "coerce"
                | "boost"
                | "meta"
                | "similarity"
                | "index_options"
                | "eager_global_ordinals"
                | "ignore_malformed"
                | "time_series_dimension"
                | "time_series_metric"
                | "split_queries_on_whitespace"
                | "locale" => {
                    field.params.insert(key.clone(), value.clone());
                }
                "analyzer" | "search_analyzer" | "normalizer"
                    if value
                        .as_str()
                        .is_some_and(|a| matches!(a, "standard" | "default")) =>
                {
                    field.params.insert(key.clone(), value.clone());
                }
                other => {
                    return Err(SearchError::mapper_parsing(format!(
                        "Failed to parse mapping: unknown parameter [{other}] on mapper [{path}] of type [{type_name}] (or one Floe's simulated Elasticsearch does not support)"
                    )));
                }
            }
        }
        if field_type == FieldType::ScaledFloat && field.scaling_factor.is_none() {
            return Err(SearchError::mapper_parsing(format!(
                "Failed to parse mapping: Field [scaling_factor] is required for [{path}]"
            )));
        }
        Ok(field)
    }

    fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("type".into(), self.field_type.name().into());
        for (key, value) in &self.params {
            out.insert(key.clone(), value.clone());
        }
        if !self.fields.is_empty() {
            let subs: Map<String, Value> = self
                .fields
                .iter()
                .map(|(name, f)| (name.clone(), f.to_json()))
                .collect();
            out.insert("fields".into(), Value::Object(subs));
        }
        Value::Object(out)
    }
}

fn type_word(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    }
}

/// `dynamic`: what a document's unmapped field does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dynamic {
    /// Maps it.
    True,
    /// Keeps it in the source, unsearchable.
    False,
    /// Refuses the document.
    Strict,
}

impl Dynamic {
    fn parse(value: &Value, path: &str) -> Result<Dynamic, SearchError> {
        match value {
            Value::Bool(true) => Ok(Dynamic::True),
            Value::Bool(false) => Ok(Dynamic::False),
            Value::String(s) if s == "true" => Ok(Dynamic::True),
            Value::String(s) if s == "false" => Ok(Dynamic::False),
            Value::String(s) if s == "strict" => Ok(Dynamic::Strict),
            other => Err(SearchError::mapper_parsing(format!(
                "Failed to parse mapping: Could not convert [{path}.dynamic] to boolean or [strict]: {other} (Floe's simulated Elasticsearch has no runtime fields)"
            ))),
        }
    }

    fn to_json(self) -> Value {
        match self {
            Dynamic::True => json!("true"),
            Dynamic::False => json!("false"),
            Dynamic::Strict => json!("strict"),
        }
    }
}

/// An object field: its own `dynamic` (else its parent's) and its
/// properties.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object {
    pub dynamic: Option<Dynamic>,
    pub properties: BTreeMap<String, Property>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Property {
    Object(Object),
    Field(Field),
}

impl Object {
    fn parse(path: &str, mapping: &Map<String, Value>) -> Result<Object, SearchError> {
        let mut object = Object::default();
        for (key, value) in mapping {
            match key.as_str() {
                "type" if value == "object" => {}
                "dynamic" => object.dynamic = Some(Dynamic::parse(value, path)?),
                "enabled" if value == &Value::Bool(true) => {}
                "properties" => {
                    let Value::Object(props) = value else {
                        return Err(SearchError::mapper_parsing(format!(
                            "Failed to parse mapping: Expected map for property [properties] on field [{path}] but got a {}",
                            type_word(value)
                        )));
                    };
                    for (name, prop) in props {
                        let child = if path.is_empty() {
                            name.clone()
                        } else {
                            format!("{path}.{name}")
                        };
                        check_field_name(name, &child)?;
                        let Value::Object(prop) = prop else {
                            return Err(SearchError::mapper_parsing(format!(
                                "Failed to parse mapping: Expected map for property [type] on field [{child}] but got a {}",
                                type_word(prop)
                            )));
                        };
                        object
                            .properties
                            .insert(name.clone(), Property::parse(&child, prop)?);
                    }
                }
                other => {
                    return Err(SearchError::mapper_parsing(format!(
                        "Failed to parse mapping: unknown parameter [{other}] on object [{path}] (or one Floe's simulated Elasticsearch does not support)"
                    )));
                }
            }
        }
        Ok(object)
    }

    fn to_json(&self) -> Value {
        let mut out = Map::new();
        if let Some(dynamic) = self.dynamic {
            out.insert("dynamic".into(), dynamic.to_json());
        }
        let props: Map<String, Value> = self
            .properties
            .iter()
            .map(|(name, p)| (name.clone(), p.to_json()))
            .collect();
        out.insert("properties".into(), Value::Object(props));
        Value::Object(out)
    }

    /// Adds `other`'s properties; a field may gain multi-fields and
    /// parameters but not change type, as in Elasticsearch.
    fn merge(&mut self, other: Object, path: &str) -> Result<(), SearchError> {
        if other.dynamic.is_some() {
            self.dynamic = other.dynamic;
        }
        for (name, prop) in other.properties {
            let child = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            match (self.properties.get_mut(&name), prop) {
                (None, prop) => {
                    self.properties.insert(name, prop);
                }
                (Some(Property::Object(mine)), Property::Object(theirs)) => {
                    mine.merge(theirs, &child)?;
                }
                (Some(Property::Field(mine)), Property::Field(theirs)) => {
                    if mine.field_type != theirs.field_type {
                        return Err(SearchError::illegal_argument(format!(
                            "mapper [{child}] cannot be changed from type [{}] to [{}]",
                            mine.field_type.name(),
                            theirs.field_type.name()
                        )));
                    }
                    for (sub, field) in theirs.fields {
                        if let Some(existing) = mine.fields.get(&sub)
                            && existing.field_type != field.field_type
                        {
                            return Err(SearchError::illegal_argument(format!(
                                "mapper [{child}.{sub}] cannot be changed from type [{}] to [{}]",
                                existing.field_type.name(),
                                field.field_type.name()
                            )));
                        }
                        mine.fields.insert(sub, field);
                    }
                    mine.params.extend(theirs.params);
                    mine.ignore_above = theirs.ignore_above.or(mine.ignore_above);
                }
                (Some(existing), theirs) => {
                    let word = |p: &Property| match p {
                        Property::Object(_) => "object",
                        Property::Field(f) => f.field_type.name(),
                    };
                    return Err(SearchError::illegal_argument(format!(
                        "can't merge a non object mapping [{child}] with an object mapping (from [{}] to [{}])",
                        word(existing),
                        word(&theirs)
                    )));
                }
            }
        }
        Ok(())
    }
}

impl Property {
    fn parse(path: &str, mapping: &Map<String, Value>) -> Result<Property, SearchError> {
        match mapping.get("type").and_then(Value::as_str) {
            None | Some("object") => Ok(Property::Object(Object::parse(path, mapping)?)),
            Some(_) => Ok(Property::Field(Field::parse(path, mapping, true)?)),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Property::Object(o) => o.to_json(),
            Property::Field(f) => f.to_json(),
        }
    }
}

fn check_field_name(name: &str, path: &str) -> Result<(), SearchError> {
    if name.is_empty() || name.trim().is_empty() {
        return Err(SearchError::mapper_parsing(format!(
            "Failed to parse mapping: field name cannot be an empty string (in [{path}])"
        )));
    }
    if name.starts_with('_') && path == name {
        return Err(SearchError::mapper_parsing(format!(
            "Failed to parse mapping: Field [{name}] is defined more than once or is a metadata field, which a document's properties cannot use"
        )));
    }
    Ok(())
}

/// One value of a leaf field, as indexed.
#[derive(Debug, Clone, PartialEq)]
pub enum Indexed {
    Text(String),
    Keyword(String),
    Long(i64),
    Double(f64),
    /// Milliseconds since the epoch.
    Date(i64),
    Boolean(bool),
}

/// An index's mappings.
#[derive(Debug, Clone, PartialEq)]
pub struct Mappings {
    pub root: Object,
    /// `date_detection`: strings that read as dates map as `date`.
    pub date_detection: bool,
    /// `numeric_detection`: strings that read as numbers map as numbers.
    pub numeric_detection: bool,
    /// `_source`, `_meta`, `_routing`: kept and shown back.
    pub meta: Map<String, Value>,
}

impl Default for Mappings {
    fn default() -> Mappings {
        Mappings {
            root: Object {
                dynamic: None,
                properties: BTreeMap::new(),
            },
            date_detection: true,
            numeric_detection: false,
            meta: Map::new(),
        }
    }
}

/// A leaf field by its full path (`user.name`, `msg.keyword`).
#[derive(Debug, Clone, PartialEq)]
pub struct LeafField {
    pub path: String,
    pub field: Field,
    /// It is a multi-field: its values are its parent's.
    pub multi: bool,
}

impl Mappings {
    /// Reads the `mappings` of a create body or of `PUT _mapping` (with or
    /// without a `_doc` type level, which 8.x refuses).
    pub fn parse(body: &Value) -> Result<Mappings, SearchError> {
        let mut mappings = Mappings::default();
        mappings.merge(body)?;
        Ok(mappings)
    }

    /// `PUT _mapping`: adds to the mappings, refusing a change of a
    /// field's type. Changes nothing when refused.
    pub fn merge(&mut self, body: &Value) -> Result<(), SearchError> {
        let Value::Object(body) = body else {
            return Err(SearchError::mapper_parsing(
                "Failed to parse mapping: mappings must be an object",
            ));
        };
        let mut next = self.clone();
        let mut root = Map::new();
        for (key, value) in body {
            match key.as_str() {
                "properties" | "dynamic" => {
                    root.insert(key.clone(), value.clone());
                }
                "date_detection" => next.date_detection = bool_param(value, key)?,
                "numeric_detection" => next.numeric_detection = bool_param(value, key)?,
                "_source" | "_meta" | "_routing" => {
                    next.meta.insert(key.clone(), value.clone());
                }
                "dynamic_date_formats" | "dynamic_templates" | "runtime" | "_doc" => {
                    return Err(SearchError::mapper_parsing(format!(
                        "Failed to parse mapping: [{key}] is not supported by Floe's simulated Elasticsearch"
                    )));
                }
                other => {
                    return Err(SearchError::mapper_parsing(format!(
                        "Root mapping definition has unsupported parameters:  [{other} : {value}]"
                    )));
                }
            }
        }
        let object = Object::parse("", &root)?;
        next.root.merge(object, "")?;
        *self = next;
        Ok(())
    }

    /// `GET _mapping`'s `mappings`.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        for (key, value) in &self.meta {
            out.insert(key.clone(), value.clone());
        }
        if let Some(dynamic) = self.root.dynamic {
            out.insert("dynamic".into(), dynamic.to_json());
        }
        if !self.date_detection {
            out.insert("date_detection".into(), json!(false));
        }
        if self.numeric_detection {
            out.insert("numeric_detection".into(), json!(true));
        }
        if !self.root.properties.is_empty() {
            let props: Map<String, Value> = self
                .root
                .properties
                .iter()
                .map(|(name, p)| (name.clone(), p.to_json()))
                .collect();
            out.insert("properties".into(), Value::Object(props));
        }
        Value::Object(out)
    }

    /// Every leaf field and multi-field, by path.
    pub fn leaves(&self) -> Vec<LeafField> {
        fn walk(object: &Object, prefix: &str, out: &mut Vec<LeafField>) {
            for (name, prop) in &object.properties {
                let path = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                match prop {
                    Property::Object(o) => walk(o, &path, out),
                    Property::Field(f) => {
                        for (sub, field) in &f.fields {
                            out.push(LeafField {
                                path: format!("{path}.{sub}"),
                                field: field.clone(),
                                multi: true,
                            });
                        }
                        out.push(LeafField {
                            path,
                            field: f.clone(),
                            multi: false,
                        });
                    }
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, "", &mut out);
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// The field at `path`, a multi-field included.
    pub fn field(&self, path: &str) -> Option<Field> {
        let mut object = &self.root;
        let parts: Vec<&str> = path.split('.').collect();
        let mut i = 0;
        while i < parts.len() {
            // A property's name may itself hold dots only through nesting,
            // so walk one segment at a time.
            match object.properties.get(parts[i])? {
                Property::Object(o) => object = o,
                Property::Field(f) => {
                    return match &parts[i + 1..] {
                        [] => Some(f.clone()),
                        [sub] => f.fields.get(*sub).cloned(),
                        _ => None,
                    };
                }
            }
            i += 1;
        }
        None
    }

    /// Maps what `source` has that the mappings lack, as dynamic mapping
    /// does; `true` if anything was added. Refuses (changing nothing) a
    /// new field under `"dynamic": "strict"`.
    pub fn map_dynamically(&mut self, source: &Value) -> Result<bool, SearchError> {
        let Value::Object(doc) = source else {
            return Ok(false);
        };
        let mut next = self.root.clone();
        let inherited = next.dynamic.unwrap_or(Dynamic::True);
        let changed = self.map_object(&mut next, doc, "", inherited)?;
        if changed {
            self.root = next;
        }
        Ok(changed)
    }

    /// What writing `source` does to the mappings and the index: maps
    /// what is new in it and reads its values; a document refused (a value
    /// its field cannot take, a new field under a strict mapping) leaves
    /// the mappings as they were, as Elasticsearch applies no mapping
    /// update for a document it does not index. Also says whether the
    /// mappings changed (only then can the index's schema lack a field).
    pub fn map_and_read(
        &mut self,
        id: &str,
        source: &Value,
    ) -> Result<(Vec<(String, Indexed)>, bool), SearchError> {
        let Value::Object(doc) = source else {
            return Ok((self.values(id, source)?, false));
        };
        // Most documents of an index bring nothing new: read them without
        // copying the mappings.
        if !could_map(&self.root, doc, true) {
            return Ok((self.values(id, source)?, false));
        }
        let mut next = self.root.clone();
        let inherited = next.dynamic.unwrap_or(Dynamic::True);
        if !self.map_object(&mut next, doc, "", inherited)? {
            return Ok((self.values(id, source)?, false));
        }
        let previous = std::mem::replace(&mut self.root, next);
        match self.values(id, source) {
            Ok(values) => Ok((values, true)),
            Err(e) => {
                self.root = previous;
                Err(e)
            }
        }
    }

    fn map_object(
        &self,
        object: &mut Object,
        doc: &Map<String, Value>,
        prefix: &str,
        inherited: Dynamic,
    ) -> Result<bool, SearchError> {
        let dynamic = object.dynamic.unwrap_or(inherited);
        let mut changed = false;
        for (key, value) in doc {
            // `{"a.b": 1}` is the field `b` of the object `a`.
            let mut names = key.split('.');
            let Some(first) = names.next() else { continue };
            let rest: Vec<&str> = names.collect();
            let value = if rest.is_empty() {
                value.clone()
            } else {
                let mut nested = value.clone();
                for name in rest.iter().rev() {
                    let mut m = Map::new();
                    m.insert((*name).to_string(), nested);
                    nested = Value::Object(m);
                }
                nested
            };
            let path = if prefix.is_empty() {
                first.to_string()
            } else {
                format!("{prefix}.{first}")
            };
            if first.is_empty() {
                return Err(SearchError::document_parsing(format!(
                    "field name cannot be an empty string (in [{key}])"
                )));
            }
            if prefix.is_empty() && first.starts_with('_') {
                return Err(SearchError::document_parsing(format!(
                    "[1:2] Field [{first}] is a metadata field and cannot be added inside a document. Use the index API request parameters."
                )));
            }
            let sample = first_value(&value);
            match object.properties.get_mut(first) {
                Some(Property::Object(child)) => {
                    if let Some(Value::Object(inner)) = sample {
                        changed |= self.map_object(child, inner, &path, dynamic)?;
                    }
                }
                Some(Property::Field(_)) => {}
                None => {
                    let Some(sample) = sample else { continue };
                    match dynamic {
                        Dynamic::False => continue,
                        Dynamic::Strict => {
                            return Err(SearchError::strict_dynamic(format!(
                                "[1:2] mapping set to strict, dynamic introduction of [{first}] within [{}] is not allowed",
                                if prefix.is_empty() { "_doc" } else { prefix }
                            )));
                        }
                        Dynamic::True => {}
                    }
                    let prop = match sample {
                        Value::Object(inner) => {
                            let mut child = Object::default();
                            self.map_object(&mut child, inner, &path, dynamic)?;
                            Property::Object(child)
                        }
                        Value::String(s) => Property::Field(self.detect(s)),
                        Value::Bool(_) => Property::Field(Field::of(FieldType::Boolean)),
                        Value::Number(n) if n.is_f64() => {
                            Property::Field(Field::of(FieldType::Float))
                        }
                        Value::Number(_) => Property::Field(Field::of(FieldType::Long)),
                        Value::Null | Value::Array(_) => continue,
                    };
                    object.properties.insert(first.to_string(), prop);
                    changed = true;
                }
            }
        }
        Ok(changed)
    }

    /// A new string field's type: a date when it reads as one (the
    /// default `dynamic_date_formats`), a number with numeric detection,
    /// else text with a keyword.
    fn detect(&self, s: &str) -> Field {
        if self.date_detection && looks_like_date(s) {
            return Field::of(FieldType::Date);
        }
        if self.numeric_detection {
            if s.parse::<i64>().is_ok() {
                return Field::of(FieldType::Long);
            }
            if s.parse::<f64>().is_ok_and(f64::is_finite) {
                return Field::of(FieldType::Float);
            }
        }
        Field::dynamic_string()
    }

    /// Every indexed value of `source`, by leaf path; a value its field
    /// cannot take refuses the document, as Elasticsearch does. Call
    /// after [`Mappings::map_dynamically`].
    pub fn values(&self, id: &str, source: &Value) -> Result<Vec<(String, Indexed)>, SearchError> {
        let mut out = Vec::new();
        if let Value::Object(doc) = source {
            collect(&self.root, doc, "", id, &mut out)?;
        }
        Ok(out)
    }
}

fn bool_param(value: &Value, key: &str) -> Result<bool, SearchError> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s == "true" => Ok(true),
        Value::String(s) if s == "false" => Ok(false),
        other => Err(SearchError::mapper_parsing(format!(
            "Failed to parse mapping: [{key}] must be a boolean, not {other}"
        ))),
    }
}

/// Whether mapping `doc` under `object` could add a field or refuse the
/// document for a name: a key no property has, a dotted or empty key, a
/// metadata name at the root, or such a key inside an object value. Reads
/// only; what it clears needs no [`Mappings::map_object`].
fn could_map(object: &Object, doc: &Map<String, Value>, root: bool) -> bool {
    doc.iter().any(|(key, value)| {
        if key.is_empty() || key.contains('.') || (root && key.starts_with('_')) {
            return true;
        }
        match object.properties.get(key) {
            None => true,
            Some(Property::Field(_)) => false,
            Some(Property::Object(child)) => match first_value(value) {
                Some(Value::Object(inner)) => could_map(child, inner, false),
                _ => false,
            },
        }
    })
}

/// A non-null value, or an array's first non-null element.
fn first_value(value: &Value) -> Option<&Value> {
    match value {
        Value::Null => None,
        Value::Array(items) => items.iter().find_map(first_value),
        other => Some(other),
    }
}

/// `strict_date_optional_time` and the slash form Elasticsearch also
/// detects by default (`yyyy/MM/dd HH:mm:ss`, `yyyy/MM/dd`).
fn looks_like_date(s: &str) -> bool {
    let b = s.as_bytes();
    let dashed = b.len() >= 10
        && b[4] == b'-'
        && b[7] == b'-'
        && dates::parse_str(s, "strict_date_optional_time").is_some();
    let slashed = b.len() >= 10
        && b[4] == b'/'
        && b[7] == b'/'
        && dates::parse_str(
            &s.replace('/', "-").replacen(' ', "T", 1),
            "strict_date_optional_time",
        )
        .is_some();
    dashed || slashed
}

fn collect(
    object: &Object,
    doc: &Map<String, Value>,
    prefix: &str,
    id: &str,
    out: &mut Vec<(String, Indexed)>,
) -> Result<(), SearchError> {
    for (key, value) in doc {
        let mut names = key.split('.');
        let Some(first) = names.next() else { continue };
        let rest: Vec<&str> = names.collect();
        let path = if prefix.is_empty() {
            first.to_string()
        } else {
            format!("{prefix}.{first}")
        };
        match object.properties.get(first) {
            None => {}
            Some(Property::Object(child)) => {
                if !rest.is_empty() {
                    let mut inner = Map::new();
                    inner.insert(rest.join("."), value.clone());
                    collect(child, &inner, &path, id, out)?;
                } else {
                    for item in flatten(value) {
                        match item {
                            Value::Object(inner) => collect(child, inner, &path, id, out)?,
                            Value::Null => {}
                            other => {
                                return Err(SearchError::document_parsing(format!(
                                    "[1:2] object mapping for [{path}] tried to parse field [{path}] as object, but found a concrete value ({other})"
                                )));
                            }
                        }
                    }
                }
            }
            Some(Property::Field(field)) => {
                if !rest.is_empty() {
                    continue;
                }
                for item in flatten(value) {
                    if item.is_null() {
                        continue;
                    }
                    if let Some(v) = leaf_value(field, item, &path, id)? {
                        out.push((path.clone(), v));
                    }
                    for (sub, sub_field) in &field.fields {
                        if let Some(v) = leaf_value(sub_field, item, &path, id)? {
                            out.push((format!("{path}.{sub}"), v));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// An array's elements (nested arrays flattened), or the value itself.
fn flatten(value: &Value) -> Vec<&Value> {
    match value {
        Value::Array(items) => items.iter().flat_map(flatten).collect(),
        other => vec![other],
    }
}

/// What `value` indexes as in `field`; `None` for a keyword over its
/// `ignore_above` or an unindexed field.
fn leaf_value(
    field: &Field,
    value: &Value,
    path: &str,
    id: &str,
) -> Result<Option<Indexed>, SearchError> {
    let refuse = || {
        let preview: String = value.to_string().chars().take(40).collect();
        SearchError::document_parsing(format!(
            "[1:2] failed to parse field [{path}] of type [{}] in document with id '{id}'. Preview of field's value: '{}'",
            field.field_type.name(),
            preview.trim_matches('"')
        ))
    };
    if !field.indexed {
        return Ok(None);
    }
    let text = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    };
    Ok(Some(match field.field_type.kind() {
        Kind::Text => Indexed::Text(text(value).ok_or_else(refuse)?),
        Kind::Keyword => {
            let s = text(value).ok_or_else(refuse)?;
            if field
                .ignore_above
                .is_some_and(|max| s.chars().count() > max)
            {
                return Ok(None);
            }
            Indexed::Keyword(s)
        }
        Kind::Long => {
            let n = number(value).ok_or_else(refuse)?;
            // Elasticsearch coerces by truncating, within the type's range.
            let (min, max) = field.field_type.bounds().unwrap_or((i64::MIN, i64::MAX));
            let t = n.trunc();
            if !t.is_finite() || t < min as f64 || t > max as f64 {
                return Err(refuse());
            }
            Indexed::Long(exact_long(value).unwrap_or(t as i64))
        }
        Kind::Double => {
            let n = number(value).ok_or_else(refuse)?;
            if !n.is_finite() {
                return Err(refuse());
            }
            Indexed::Double(match field.field_type {
                // Stored at the type's precision, as its doc values are.
                FieldType::Float | FieldType::HalfFloat => f64::from(n as f32),
                FieldType::ScaledFloat => {
                    let factor = field.scaling_factor.unwrap_or(1.0);
                    (n * factor).round() / factor
                }
                _ => n,
            })
        }
        Kind::Date => {
            Indexed::Date(dates::parse_value(value, field.date_format()).ok_or_else(refuse)?)
        }
        Kind::Boolean => match value {
            Value::Bool(b) => Indexed::Boolean(*b),
            Value::String(s) if s == "true" => Indexed::Boolean(true),
            Value::String(s) if s == "false" || s.is_empty() => Indexed::Boolean(false),
            _ => return Err(refuse()),
        },
    }))
}

fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

/// A whole number read without going through `f64` (which loses
/// precision above 2^53).
fn exact_long(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    type TestResult = Result<(), Box<dyn std::error::Error>>;
    use super::*;

    #[test]
    fn dynamic_mapping_makes_what_elasticsearch_makes() -> TestResult {
        let mut m = Mappings::default();
        let doc = json!({"msg": "hello", "n": 3, "f": 1.5, "ok": true,
                         "at": "2024-01-02T03:04:05Z", "user": {"name": "ann"}, "tags": ["a", "b"]});
        assert!(m.map_dynamically(&doc)?);
        assert_eq!(
            m.to_json(),
            json!({"properties": {
                "at": {"type": "date"},
                "f": {"type": "float"},
                "msg": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}},
                "n": {"type": "long"},
                "ok": {"type": "boolean"},
                "tags": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}},
                "user": {"properties": {"name": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}}}
            }})
        );
        assert!(!m.map_dynamically(&doc)?, "nothing new the second time");
        let values = m.values("1", &doc)?;
        assert!(values.contains(&("msg.keyword".into(), Indexed::Keyword("hello".into()))));
        assert!(values.contains(&("n".into(), Indexed::Long(3))));
        assert!(values.contains(&("tags".into(), Indexed::Text("b".into()))));
        Ok(())
    }

    #[test]
    fn a_value_the_field_cannot_take_refuses_the_document() -> TestResult {
        let mut m = Mappings::parse(&json!({"properties": {"n": {"type": "integer"}}}))?;
        assert_eq!(
            m.values("1", &json!({"n": "7"}))?,
            vec![("n".into(), Indexed::Long(7))]
        );
        assert_eq!(
            m.values("1", &json!({"n": 7.9}))?,
            vec![("n".into(), Indexed::Long(7))]
        );
        let e = m
            .values("1", &json!({"n": "seven"}))
            .err()
            .ok_or("expected an error")?;
        assert_eq!(e.error_type, "document_parsing_exception");
        assert!(
            m.values("1", &json!({"n": 1_u64 << 40})).is_err(),
            "beyond integer"
        );
        // A refused document maps nothing of what it brought.
        let e = m
            .map_and_read("1", &json!({"n": "seven", "fresh": "x"}))
            .err()
            .ok_or("expected an error")?;
        assert_eq!(e.error_type, "document_parsing_exception");
        assert!(m.field("fresh").is_none());
        let (values, remapped) = m.map_and_read("1", &json!({"n": 2, "fresh": "x"}))?;
        assert!(remapped && m.field("fresh").is_some());
        assert!(values.contains(&("n".into(), Indexed::Long(2))));
        m.merge(&json!({"dynamic": "strict"}))?;
        let e = m
            .map_dynamically(&json!({"other": 1}))
            .err()
            .ok_or("expected an error")?;
        assert_eq!(e.error_type, "strict_dynamic_mapping_exception");
        Ok(())
    }

    /// A document whose every field is mapped is read as it is; one with
    /// a new field anywhere, or a name the root refuses, goes through
    /// mapping, which adds or refuses as before.
    #[test]
    fn only_a_document_with_something_new_is_mapped() -> TestResult {
        let mut m = Mappings::default();
        m.map_dynamically(&json!({"n": 1, "user": {"name": "ann"}, "tags": [{"k": "a"}]}))?;
        let before = m.to_json();
        let (_, remapped) = m.map_and_read(
            "1",
            &json!({"n": 2, "user": {"name": "bo"}, "tags": [{"k": "b"}]}),
        )?;
        assert!(!remapped);
        assert_eq!(m.to_json(), before);
        let (_, remapped) = m.map_and_read("2", &json!({"user": {"age": 3}}))?;
        assert!(remapped && m.field("user.age").is_some());
        let (_, remapped) = m.map_and_read("3", &json!({"user.city": "x"}))?;
        assert!(remapped && m.field("user.city").is_some());
        let e = m
            .map_and_read("4", &json!({"n": 1, "_id": "x"}))
            .err()
            .ok_or("a metadata field inside a document was taken")?;
        assert_eq!(e.error_type, "document_parsing_exception");
        Ok(())
    }

    #[test]
    fn mappings_grow_but_types_do_not_change() -> TestResult {
        let mut m = Mappings::parse(&json!({"properties": {"a": {"type": "keyword"}}}))?;
        m.merge(&json!({"properties": {"b": {"type": "long"}}}))?;
        let e = m
            .merge(&json!({"properties": {"a": {"type": "long"}}}))
            .err()
            .ok_or("expected an error")?;
        assert_eq!(
            e.reason,
            "mapper [a] cannot be changed from type [keyword] to [long]"
        );
        assert!(m.field("b").is_some());
        let e = Mappings::parse(&json!({"properties": {"g": {"type": "geo_point"}}}))
            .err()
            .ok_or("expected an error")?;
        assert_eq!(e.error_type, "mapper_parsing_exception");
        assert!(
            e.reason
                .contains("No handler for type [geo_point] declared on field [g]")
        );
        Ok(())
    }
}
