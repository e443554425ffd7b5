//! DynamoDB adapter of the storage port.
//!
//! Every record of every organization lives in one table, so that a page of
//! one kind is one `Query` on one partition and a batch is one transaction,
//! without a GSI or a `Scan`:
//!
//! | attribute    | type | content                                             |
//! |--------------|------|-----------------------------------------------------|
//! | `pk`         | S    | partition key, `ORG#{org}`                          |
//! | `sk`         | S    | sort key, `{kind prefix}#{key}` (`REPO#backups`)    |
//! | `body`       | S    | the entity as JSON                                  |
//! | `version`    | N    | starts at 1                                         |
//! | `refs`       | N    | changed only by `Write::Refs` and `Write::RefsAt`   |
//! | `name`       | S    | optional, for list filters                          |
//! | `status`     | S    | optional, for list filters                          |
//! | `tags`       | SS   | `key:value`; absent when empty                      |
//! | `expires_at` | N    | optional epoch seconds; the table's TTL attribute   |
//!
//! TTL deletes expired items lazily (up to days later), so every read and
//! every condition treats an item with `expires_at <= now` as absent, as the
//! port asks.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::str::FromStr;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{BuildError, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, Delete, KeySchemaElement, KeyType, Put,
    ReturnValuesOnConditionCheckFailure, ScalarAttributeType, TableStatus, TimeToLiveSpecification,
    TimeToLiveStatus, TransactWriteItem, Update,
};

use floe_aws_errors::describe;
use floe_store::backend::{
    Attrs, Backend, BackendError, Kind, ListQuery, Record, RecordKey, RecordPage, Write,
    WriteFailure, now_epoch,
};

const PK: &str = "pk";
const SK: &str = "sk";
const BODY: &str = "body";
const VERSION: &str = "version";
const REFS: &str = "refs";
const NAME: &str = "name";
const STATUS: &str = "status";
const TAGS: &str = "tags";
const EXPIRES_AT: &str = "expires_at";

/// DynamoDB's limit on the actions of one `TransactWriteItems`.
const MAX_BATCH: usize = 100;
/// Attempts at a batch that keeps losing to concurrent transactions. The SDK
/// does not retry a cancelled transaction, so we do.
const WRITE_ATTEMPTS: u32 = 4;
const BACKOFF_BASE: Duration = Duration::from_millis(25);
/// A new on-demand table is usually ACTIVE within seconds; this only bounds
/// how long `ensure_table` hangs when something is wrong.
const ACTIVE_TIMEOUT: Duration = Duration::from_secs(120);
const ACTIVE_POLL: Duration = Duration::from_millis(500);

type Item = HashMap<String, AttributeValue>;

/// DynamoDB's table naming rule (3–255 of letters, digits, `_`, `-`, `.`),
/// checked where configuration names a table, before any call.
pub fn is_table_name(name: &str) -> bool {
    (3..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The DynamoDB operations the store calls while serving. Kept honest by
/// the workspace's IAM registry test. IAM has no `TransactWriteItems`
/// action: a transaction is authorised item by item (`PutItem`,
/// `UpdateItem`, `DeleteItem`), which the template check expands it into.
pub const OPERATIONS: &[&str] = &[
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:TransactWriteItems",
];

/// Actions only `ensure_table` calls: local tooling and tests, never granted
/// in production, where the stack owns the table.
pub const SETUP_OPERATIONS: &[&str] = &[
    "dynamodb:DescribeTable",
    "dynamodb:CreateTable",
    "dynamodb:DescribeTimeToLive",
    "dynamodb:UpdateTimeToLive",
];

/// The storage port on one DynamoDB table (layout in the module docs).
#[derive(Clone)]
pub struct DynamoBackend {
    client: Client,
    table: String,
}

// The client's configuration is left out: it holds the credentials provider.
impl std::fmt::Debug for DynamoBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoBackend")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl DynamoBackend {
    /// The table `table`, through a client built from the process's shared
    /// SDK configuration (region, credentials, `AWS_ENDPOINT_URL`).
    pub fn new(sdk: &aws_config::SdkConfig, table: impl Into<String>) -> DynamoBackend {
        DynamoBackend {
            client: Client::new(sdk),
            table: table.into(),
        }
    }

    /// The table `table` through a client built by the caller: benchmarks
    /// and tests add an interceptor to count what goes on the wire.
    pub fn from_client(client: Client, table: impl Into<String>) -> DynamoBackend {
        DynamoBackend {
            client,
            table: table.into(),
        }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table (on-demand billing) unless it exists, waits until it
    /// is ACTIVE and enables TTL on `expires_at`. Tests and local tooling use
    /// it; production creates the same table from the SAM template.
    pub async fn ensure_table(&self) -> Result<(), BackendError> {
        match self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
        {
            Ok(_) => {}
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_resource_not_found_exception()) =>
            {
                self.create_table().await?;
            }
            Err(err) => return Err(self.unavailable("DescribeTable", &err)),
        }
        self.wait_until_active().await?;
        // Expiry is enforced by every read and condition; TTL only reclaims
        // space. So a table without TTL (an emulator lacking it) still works.
        if let Err(message) = self.enable_ttl().await {
            tracing::warn!(
                table = %self.table,
                error = %message,
                "could not enable TTL on expires_at; expired records stay stored but are ignored"
            );
        }
        Ok(())
    }

    async fn create_table(&self) -> Result<(), BackendError> {
        let key = |attr: &str, key_type: KeyType| {
            KeySchemaElement::builder()
                .attribute_name(attr)
                .key_type(key_type)
                .build()
        };
        let string_attr = |attr: &str| {
            AttributeDefinition::builder()
                .attribute_name(attr)
                .attribute_type(ScalarAttributeType::S)
                .build()
        };
        let result = self
            .client
            .create_table()
            .table_name(&self.table)
            .billing_mode(BillingMode::PayPerRequest)
            .key_schema(key(PK, KeyType::Hash).map_err(build_error)?)
            .key_schema(key(SK, KeyType::Range).map_err(build_error)?)
            .attribute_definitions(string_attr(PK).map_err(build_error)?)
            .attribute_definitions(string_attr(SK).map_err(build_error)?)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Another process created it between our DescribeTable and now.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_resource_in_use_exception()) =>
            {
                Ok(())
            }
            Err(err) => Err(self.unavailable("CreateTable", &err)),
        }
    }

    async fn wait_until_active(&self) -> Result<(), BackendError> {
        let deadline = Instant::now() + ACTIVE_TIMEOUT;
        loop {
            let described = self
                .client
                .describe_table()
                .table_name(&self.table)
                .send()
                .await
                .map_err(|err| self.unavailable("DescribeTable", &err))?;
            let status = described.table().and_then(|t| t.table_status());
            if status == Some(&TableStatus::Active) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(BackendError::Unavailable(format!(
                    "DynamoDB table {} is not ACTIVE after {}s (status {status:?})",
                    self.table,
                    ACTIVE_TIMEOUT.as_secs()
                )));
            }
            tokio::time::sleep(ACTIVE_POLL).await;
        }
    }

    async fn enable_ttl(&self) -> Result<(), String> {
        let described = self
            .client
            .describe_time_to_live()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|err| describe(&err))?;
        if let Some(ttl) = described.time_to_live_description() {
            let on = matches!(
                ttl.time_to_live_status(),
                Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
            );
            // DynamoDB refuses to enable TTL twice, so only ask when it is off.
            if on && ttl.attribute_name() == Some(EXPIRES_AT) {
                return Ok(());
            }
        }
        let spec = TimeToLiveSpecification::builder()
            .enabled(true)
            .attribute_name(EXPIRES_AT)
            .build()
            .map_err(|err| err.to_string())?;
        self.client
            .update_time_to_live()
            .table_name(&self.table)
            .time_to_live_specification(spec)
            .send()
            .await
            .map_err(|err| describe(&err))?;
        Ok(())
    }

    fn unavailable<E>(&self, operation: &str, err: &SdkError<E, HttpResponse>) -> BackendError
    where
        E: std::error::Error + 'static,
    {
        BackendError::Unavailable(format!(
            "DynamoDB {operation} on table {}: {}",
            self.table,
            describe(err)
        ))
    }

    /// Every batch, even of one write, is a transaction: the SDK then gives
    /// it a `ClientRequestToken` that its own retries (after a timeout or a
    /// 500) reuse, so a write DynamoDB applied but could not acknowledge is
    /// not applied twice. A plain `UpdateItem` retried that way would add a
    /// `Refs` delta twice, or fail an `Update` against its own new version.
    /// The price is twice the write capacity, small for a control plane.
    async fn write_once(&self, prepared: &[Prepared]) -> Result<(), Failure> {
        if prepared.is_empty() {
            return Ok(());
        }
        let mut items = Vec::with_capacity(prepared.len());
        for p in prepared {
            items.push(self.transact_item(p).map_err(Failure::Fatal)?);
        }
        self.client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map(drop)
            .map_err(|err| transaction_failure(&err))
    }

    fn transact_item(&self, p: &Prepared) -> Result<TransactWriteItem, String> {
        let all_old = ReturnValuesOnConditionCheckFailure::AllOld;
        let item = match &p.action {
            Action::Put(item) => TransactWriteItem::builder().put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(item.clone()))
                    .condition_expression(&p.condition)
                    .set_expression_attribute_names(p.expr.names())
                    .set_expression_attribute_values(p.expr.values())
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(|err| err.to_string())?,
            ),
            Action::Update { key, expression } => TransactWriteItem::builder().update(
                Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(key.clone()))
                    .update_expression(expression)
                    .condition_expression(&p.condition)
                    .set_expression_attribute_names(p.expr.names())
                    .set_expression_attribute_values(p.expr.values())
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(|err| err.to_string())?,
            ),
            Action::Delete(key) => TransactWriteItem::builder().delete(
                Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(key.clone()))
                    .condition_expression(&p.condition)
                    .set_expression_attribute_names(p.expr.names())
                    .set_expression_attribute_values(p.expr.values())
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(|err| err.to_string())?,
            ),
        };
        Ok(item.build())
    }
}

#[async_trait]
impl Backend for DynamoBackend {
    async fn get(&self, key: &RecordKey) -> Result<Option<Record>, BackendError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key_item(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| self.unavailable("GetItem", &err))?;
        let Some(item) = out.item() else {
            return Ok(None);
        };
        let record = decode_record(item)?;
        Ok(record
            .expires_at
            .is_none_or(|at| !expired(at, now_epoch()))
            .then_some(record))
    }

    async fn list(&self, query: &ListQuery) -> Result<RecordPage, BackendError> {
        let pk = pk_value(&query.org);
        let kind_prefix = format!("{}#", query.kind.prefix());
        // The cursor is rebuilt from the key alone, so a client can never
        // steer the query into another partition. DynamoDB rejects a start
        // key outside the key condition, so a cursor before the prefix
        // starts at the beginning and one past it has nothing after it.
        let start = match query.after.as_deref() {
            None => None,
            Some(after) if after < query.key_prefix.as_str() => None,
            Some(after) if !after.starts_with(query.key_prefix.as_str()) => {
                return Ok(RecordPage {
                    records: Vec::new(),
                    next: None,
                });
            }
            Some(after) => Some(HashMap::from([
                (PK.to_owned(), AttributeValue::S(pk.clone())),
                (
                    SK.to_owned(),
                    AttributeValue::S(format!("{kind_prefix}{after}")),
                ),
            ])),
        };

        let mut expr = Expr::default();
        let key_condition = format!(
            "{} = {} AND begins_with({}, {})",
            expr.name(PK),
            expr.value("pk", AttributeValue::S(pk)),
            expr.name(SK),
            expr.value(
                "prefix",
                AttributeValue::S(format!("{kind_prefix}{}", query.key_prefix))
            ),
        );
        let mut filters = vec![expr.live(now_epoch())];
        if let Some(prefix) = &query.filter.name_prefix {
            let name = expr.name(NAME);
            let value = expr.value("name_prefix", AttributeValue::S(prefix.clone()));
            filters.push(format!("begins_with({name}, {value})"));
        }
        if let Some(status) = &query.filter.status {
            let name = expr.name(STATUS);
            let value = expr.value("status", AttributeValue::S(status.clone()));
            filters.push(format!("{name} = {value}"));
        }
        if let Some(tag) = &query.filter.tag {
            let name = expr.name(TAGS);
            let value = expr.value("tag", AttributeValue::S(tag.clone()));
            filters.push(format!("contains({name}, {value})"));
        }
        // The port promises 1 to 1000; DynamoDB refuses 0 outright.
        let limit = i32::try_from(query.limit.clamp(1, 1000)).unwrap_or(1000);

        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression(key_condition)
            .filter_expression(filters.join(" AND "))
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .set_exclusive_start_key(start)
            .limit(limit)
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| self.unavailable("Query", &err))?;

        let records = out
            .items()
            .iter()
            .map(decode_record)
            .collect::<Result<Vec<_>, _>>()?;
        let next = match out.last_evaluated_key().and_then(|key| key.get(SK)) {
            None => None,
            Some(sk) => {
                let sk = sk
                    .as_s()
                    .map_err(|_| corrupt("LastEvaluatedKey sk is not a string"))?;
                let key = sk.strip_prefix(kind_prefix.as_str()).ok_or_else(|| {
                    corrupt(format!(
                        "LastEvaluatedKey sk {sk:?} lacks the prefix {kind_prefix:?}"
                    ))
                })?;
                Some(key.to_owned())
            }
        };
        Ok(RecordPage { records, next })
    }

    async fn write(&self, writes: Vec<Write>) -> Result<(), BackendError> {
        if writes.len() > MAX_BATCH {
            return Err(BackendError::Unavailable(format!(
                "a batch holds at most {MAX_BATCH} writes, this one has {} (a bug in the caller)",
                writes.len()
            )));
        }
        let now = now_epoch();
        let prepared: Vec<Prepared> = writes.iter().map(|w| prepare(w, now)).collect();
        let mut last = String::new();
        for attempt in 0..WRITE_ATTEMPTS {
            match self.write_once(&prepared).await {
                Ok(()) => return Ok(()),
                Err(Failure::Condition { index, old }) => {
                    let write = writes.get(index).ok_or_else(|| {
                        BackendError::Unavailable(format!(
                            "DynamoDB reported a failed condition on write {index} of {}",
                            writes.len()
                        ))
                    })?;
                    let failure = classify(write, old.as_ref(), now)?;
                    return Err(BackendError::Failed { index, failure });
                }
                Err(Failure::Fatal(message)) => {
                    return Err(BackendError::Unavailable(format!(
                        "DynamoDB write on table {}: {message}",
                        self.table
                    )));
                }
                Err(Failure::Transient(message)) => {
                    tracing::debug!(
                        table = %self.table,
                        attempt,
                        error = %message,
                        "write lost a race, retrying"
                    );
                    last = message;
                    if attempt + 1 < WRITE_ATTEMPTS {
                        tokio::time::sleep(backoff(attempt)).await;
                    }
                }
            }
        }
        Err(BackendError::Unavailable(format!(
            "DynamoDB write on table {} still conflicted after {WRITE_ATTEMPTS} attempts: {last}",
            self.table
        )))
    }
}

/// Why one attempt at a batch did not apply.
enum Failure {
    /// Write `index` failed its condition; `old` is the item as DynamoDB saw
    /// it (absent when there was none).
    Condition {
        index: usize,
        old: Option<Item>,
    },
    /// Lost to a concurrent transaction or throttled inside one: worth
    /// another attempt.
    Transient(String),
    Fatal(String),
}

fn transaction_failure(err: &SdkError<TransactWriteItemsError, HttpResponse>) -> Failure {
    let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
        err.as_service_error()
    else {
        return Failure::Fatal(describe(err));
    };
    let reasons = cancelled.cancellation_reasons();
    if let Some((index, reason)) = reasons
        .iter()
        .enumerate()
        .find(|(_, r)| r.code() == Some("ConditionalCheckFailed"))
    {
        return Failure::Condition {
            index,
            old: reason.item().cloned(),
        };
    }
    let codes: Vec<String> = reasons
        .iter()
        .map(|r| match r.message() {
            Some(message) => format!("{}: {message}", r.code().unwrap_or("?")),
            None => r.code().unwrap_or("?").to_owned(),
        })
        .collect();
    let message = format!("{} (reasons: {})", describe(err), codes.join(", "));
    // The SDK retries throttling of the whole request itself (with jittered
    // backoff and a retry quota); these arrive inside a cancellation, where
    // it cannot see them.
    let transient = reasons.iter().any(|r| {
        matches!(
            r.code(),
            Some("TransactionConflict" | "ThrottlingError" | "ProvisionedThroughputExceeded")
        )
    });
    if transient {
        Failure::Transient(message)
    } else {
        Failure::Fatal(message)
    }
}

/// Tells which rule a write broke from the item its condition was checked
/// against.
fn classify(write: &Write, old: Option<&Item>, now: i64) -> Result<WriteFailure, BackendError> {
    // Create's condition fails only on an unexpired item.
    if let Write::Create(_) = write {
        return Ok(WriteFailure::Exists);
    }
    let stored = match old {
        Some(item) => Some(Stored::read(item)?),
        None => None,
    };
    let Some(stored) = stored.filter(|s| s.expires_at.is_none_or(|at| !expired(at, now))) else {
        return Ok(WriteFailure::Missing);
    };
    match write {
        Write::Update { expected, .. } | Write::Delete { expected, .. }
            if stored.version != *expected =>
        {
            Ok(WriteFailure::VersionMismatch {
                current: stored.version,
            })
        }
        Write::Delete {
            unreferenced: true, ..
        } if stored.refs > 0 => Ok(WriteFailure::Referenced { refs: stored.refs }),
        Write::RefsAt { expected, .. } if stored.version != *expected => {
            Ok(WriteFailure::VersionMismatch {
                current: stored.version,
            })
        }
        Write::Refs { delta, .. } | Write::RefsAt { delta, .. }
            if *delta < 0 && stored.refs < delta.unsigned_abs() =>
        {
            Ok(WriteFailure::Underflow)
        }
        _ => Err(BackendError::Unavailable(format!(
            "DynamoDB refused a write whose condition the stored item (version {}, refs {}) \
             satisfies",
            stored.version, stored.refs
        ))),
    }
}

/// The part of a stored item that conditions look at.
struct Stored {
    version: u64,
    refs: u64,
    expires_at: Option<i64>,
}

impl Stored {
    fn read(item: &Item) -> Result<Stored, BackendError> {
        Ok(Stored {
            version: required(number_attr(item, VERSION)?, VERSION)?,
            refs: required(number_attr(item, REFS)?, REFS)?,
            expires_at: number_attr(item, EXPIRES_AT)?,
        })
    }
}

/// One boundary for reads, conditions and the SQLite adapter: a record is
/// gone from the second `expires_at` on.
fn expired(expires_at: i64, now: i64) -> bool {
    expires_at <= now
}

/// One write in DynamoDB terms, before it becomes a transaction action.
struct Prepared {
    action: Action,
    condition: String,
    expr: Expr,
}

enum Action {
    Put(Item),
    Update { key: Item, expression: String },
    Delete(Item),
}

fn prepare(write: &Write, now: i64) -> Prepared {
    let mut expr = Expr::default();
    match write {
        Write::Create(record) => {
            let pk = expr.name(PK);
            let expires_at = expr.name(EXPIRES_AT);
            let now = expr.value("now", number(now));
            // An expired record (an old idempotency key) may be replaced.
            let condition = format!("attribute_not_exists({pk}) OR {expires_at} <= {now}");
            Prepared {
                action: Action::Put(record_item(record)),
                condition,
                expr,
            }
        }
        Write::Update { record, expected } => {
            let mut sets = vec![
                format!(
                    "{} = {}",
                    expr.name(BODY),
                    expr.value("body", AttributeValue::S(record.body.clone()))
                ),
                format!(
                    "{} = {}",
                    expr.name(VERSION),
                    expr.value("version", number(record.version))
                ),
            ];
            let mut removes = Vec::new();
            let optional = [
                (NAME, record.attrs.name.clone().map(AttributeValue::S)),
                (STATUS, record.attrs.status.clone().map(AttributeValue::S)),
                (TAGS, tag_set(&record.attrs)),
                (EXPIRES_AT, record.expires_at.map(number)),
            ];
            for (attr, value) in optional {
                let name = expr.name(attr);
                match value {
                    Some(value) => sets.push(format!("{name} = {}", expr.value(attr, value))),
                    None => removes.push(name),
                }
            }
            let mut expression = format!("SET {}", sets.join(", "));
            if !removes.is_empty() {
                expression.push_str(&format!(" REMOVE {}", removes.join(", ")));
            }
            let condition = expr.current_version(*expected, now);
            Prepared {
                action: Action::Update {
                    key: key_item(&record.key),
                    expression,
                },
                condition,
                expr,
            }
        }
        Write::Delete {
            key,
            expected,
            unreferenced,
        } => {
            let mut condition = expr.current_version(*expected, now);
            if *unreferenced {
                let refs = expr.name(REFS);
                let zero = expr.value("zero", number(0u64));
                condition.push_str(&format!(" AND {refs} = {zero}"));
            }
            Prepared {
                action: Action::Delete(key_item(key)),
                condition,
                expr,
            }
        }
        Write::Refs { key, delta } => prepare_refs(expr, key, *delta, None, now),
        Write::RefsAt {
            key,
            delta,
            expected,
        } => prepare_refs(expr, key, *delta, Some(*expected), now),
    }
}

/// `Refs` and `RefsAt`: `delta` added to an existing live item's refs,
/// never below zero, and with `expected` only while the item is at that
/// version.
fn prepare_refs(
    mut expr: Expr,
    key: &RecordKey,
    delta: i64,
    expected: Option<u64>,
    now: i64,
) -> Prepared {
    let refs = expr.name(REFS);
    let expression = format!(
        "SET {refs} = {refs} + {}",
        expr.value("delta", number(delta))
    );
    let mut condition = match expected {
        Some(expected) => expr.current_version(expected, now),
        None => format!("attribute_exists({}) AND {}", expr.name(PK), expr.live(now)),
    };
    if delta < 0 {
        let abs = expr.value("abs", number(delta.unsigned_abs()));
        condition.push_str(&format!(" AND {refs} >= {abs}"));
    }
    Prepared {
        action: Action::Update {
            key: key_item(key),
            expression,
        },
        condition,
        expr,
    }
}

/// Placeholders of one request. DynamoDB refuses unused names and values,
/// so each is added only when an expression uses it; names always go
/// through a placeholder because `name` and `status` are reserved words.
#[derive(Default)]
struct Expr {
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Expr {
    fn name(&mut self, attr: &str) -> String {
        let placeholder = format!("#{attr}");
        self.names.insert(placeholder.clone(), attr.to_owned());
        placeholder
    }

    fn value(&mut self, label: &str, value: AttributeValue) -> String {
        let placeholder = format!(":{label}");
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    /// The item is not expired.
    fn live(&mut self, now: i64) -> String {
        let expires_at = self.name(EXPIRES_AT);
        let now = self.value("now", number(now));
        format!("(attribute_not_exists({expires_at}) OR {expires_at} > {now})")
    }

    /// The item exists, is live and has version `expected`.
    fn current_version(&mut self, expected: u64, now: i64) -> String {
        let pk = self.name(PK);
        let version = self.name(VERSION);
        let expected = self.value("expected", number(expected));
        let live = self.live(now);
        format!("attribute_exists({pk}) AND {version} = {expected} AND {live}")
    }

    fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    fn values(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }
}

fn pk_value(org: &str) -> String {
    format!("ORG#{org}")
}

fn sk_value(kind: Kind, key: &str) -> String {
    format!("{}#{key}", kind.prefix())
}

fn key_item(key: &RecordKey) -> Item {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(pk_value(&key.org))),
        (
            SK.to_owned(),
            AttributeValue::S(sk_value(key.kind, &key.key)),
        ),
    ])
}

fn number(n: impl ToString) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

/// A string set refuses to be empty or to hold duplicates, and comes back in
/// no particular order; tags are therefore stored deduplicated and read back
/// sorted.
fn tag_set(attrs: &Attrs) -> Option<AttributeValue> {
    let mut tags = attrs.tags.clone();
    tags.sort();
    tags.dedup();
    (!tags.is_empty()).then_some(AttributeValue::Ss(tags))
}

fn record_item(record: &Record) -> Item {
    let mut item = key_item(&record.key);
    item.insert(BODY.to_owned(), AttributeValue::S(record.body.clone()));
    item.insert(VERSION.to_owned(), number(record.version));
    item.insert(REFS.to_owned(), number(record.refs));
    if let Some(name) = &record.attrs.name {
        item.insert(NAME.to_owned(), AttributeValue::S(name.clone()));
    }
    if let Some(status) = &record.attrs.status {
        item.insert(STATUS.to_owned(), AttributeValue::S(status.clone()));
    }
    if let Some(tags) = tag_set(&record.attrs) {
        item.insert(TAGS.to_owned(), tags);
    }
    if let Some(expires_at) = record.expires_at {
        item.insert(EXPIRES_AT.to_owned(), number(expires_at));
    }
    item
}

fn decode_record(item: &Item) -> Result<Record, BackendError> {
    let pk = required(string_attr(item, PK)?, PK)?;
    let sk = required(string_attr(item, SK)?, SK)?;
    let org = pk
        .strip_prefix("ORG#")
        .ok_or_else(|| corrupt(format!("pk {pk:?} lacks ORG#")))?;
    let (prefix, key) = sk
        .split_once('#')
        .ok_or_else(|| corrupt(format!("sk {sk:?} has no kind prefix")))?;
    let kind = Kind::from_prefix(prefix)
        .ok_or_else(|| corrupt(format!("sk {sk:?} has an unknown kind")))?;
    let mut tags = match item.get(TAGS) {
        None => Vec::new(),
        Some(AttributeValue::Ss(tags)) => tags.clone(),
        Some(_) => return Err(corrupt(format!("{TAGS} of {pk}/{sk} is not a string set"))),
    };
    tags.sort();
    let stored = Stored::read(item)?;
    Ok(Record {
        key: RecordKey::new(org, kind, key),
        body: required(string_attr(item, BODY)?, BODY)?.to_owned(),
        version: stored.version,
        refs: stored.refs,
        attrs: Attrs {
            name: string_attr(item, NAME)?.map(str::to_owned),
            status: string_attr(item, STATUS)?.map(str::to_owned),
            tags,
        },
        expires_at: stored.expires_at,
    })
}

fn string_attr<'a>(item: &'a Item, attr: &str) -> Result<Option<&'a str>, BackendError> {
    match item.get(attr) {
        None => Ok(None),
        Some(AttributeValue::S(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(corrupt(format!("attribute {attr} is not a string"))),
    }
}

fn number_attr<T: FromStr>(item: &Item, attr: &str) -> Result<Option<T>, BackendError> {
    match item.get(attr) {
        None => Ok(None),
        Some(AttributeValue::N(n)) => n
            .parse()
            .map(Some)
            .map_err(|_| corrupt(format!("attribute {attr} holds {n:?}, out of range"))),
        Some(_) => Err(corrupt(format!("attribute {attr} is not a number"))),
    }
}

fn required<T>(value: Option<T>, attr: &str) -> Result<T, BackendError> {
    value.ok_or_else(|| corrupt(format!("attribute {attr} is missing")))
}

fn corrupt(message: impl Into<String>) -> BackendError {
    BackendError::Corrupt(message.into())
}

fn build_error(err: BuildError) -> BackendError {
    BackendError::Unavailable(format!("could not build a DynamoDB request: {err}"))
}

/// Exponential backoff with jitter, so that writers that collided once do
/// not collide again in lockstep.
fn backoff(attempt: u32) -> Duration {
    let ceiling = BACKOFF_BASE.saturating_mul(1 << attempt.min(8));
    // A fresh RandomState is randomly keyed: enough randomness for jitter
    // without a dependency on a random number crate.
    let random = RandomState::new().build_hasher().finish();
    let fraction = (random % 1000) as f64 / 1000.0;
    ceiling / 2 + (ceiling / 2).mul_f64(fraction)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{SystemTime, UNIX_EPOCH};

    use aws_sdk_dynamodb::config::interceptors::{
        BeforeDeserializationInterceptorContextMut, BeforeTransmitInterceptorContextMut,
    };
    use aws_sdk_dynamodb::config::{
        BehaviorVersion, ConfigBag, Credentials, Intercept, Region, RuntimeComponents,
    };
    use aws_sdk_dynamodb::error::BoxError;

    use super::*;
    use floe_store::backend::Filter;

    const ORG: &str = "acme";

    /// What the client sent, and conflicts to fake on the next writes.
    #[derive(Debug, Default)]
    struct Wire {
        operations: Mutex<Vec<String>>,
        conflicts_to_inject: AtomicUsize,
        /// The cancellation reason of injected failures.
        fault_reason: Mutex<&'static str>,
        pending_fault: Mutex<Option<String>>,
        close_connections: bool,
    }

    impl Wire {
        fn operations(&self) -> Vec<String> {
            self.operations.lock().expect("wire lock").clone()
        }

        fn clear(&self) {
            self.operations.lock().expect("wire lock").clear();
        }

        fn inject(&self, failures: usize, reason: &'static str) {
            *self.fault_reason.lock().expect("wire lock") = reason;
            self.conflicts_to_inject.store(failures, Ordering::SeqCst);
        }
    }

    /// Records each request's operation and, while `conflicts_to_inject` is
    /// positive, turns a transaction into a harmless ListTables on the wire
    /// and answers it with the cancellation DynamoDB gives a transaction that
    /// lost a race or was throttled (moto never produces either).
    #[derive(Debug)]
    struct WireInterceptor(Arc<Wire>);

    impl Intercept for WireInterceptor {
        fn name(&self) -> &'static str {
            "floe-test-wire"
        }

        fn modify_before_transmit(
            &self,
            ctx: &mut BeforeTransmitInterceptorContextMut<'_>,
            _components: &RuntimeComponents,
            _cfg: &mut ConfigBag,
        ) -> Result<(), BoxError> {
            let target = ctx
                .request()
                .headers()
                .get("x-amz-target")
                .unwrap_or_default()
                .to_owned();
            let operation = target.rsplit('.').next().unwrap_or_default().to_owned();
            self.0
                .operations
                .lock()
                .expect("wire lock")
                .push(operation.clone());
            if self.0.close_connections {
                ctx.request_mut()
                    .headers_mut()
                    .insert("connection", "close");
            }
            let inject = operation == "TransactWriteItems"
                && self
                    .0
                    .conflicts_to_inject
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
            if inject {
                ctx.request_mut()
                    .headers_mut()
                    .insert("x-amz-target", "DynamoDB_20120810.ListTables");
                let reason = *self.0.fault_reason.lock().expect("wire lock");
                let body = format!(
                    r#"{{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [{reason}]","CancellationReasons":[{{"Code":"{reason}","Message":"injected by the test"}}]}}"#
                );
                *self.0.pending_fault.lock().expect("wire lock") = Some(body);
            }
            Ok(())
        }

        fn modify_before_deserialization(
            &self,
            ctx: &mut BeforeDeserializationInterceptorContextMut<'_>,
            _components: &RuntimeComponents,
            _cfg: &mut ConfigBag,
        ) -> Result<(), BoxError> {
            if let Some(body) = self.0.pending_fault.lock().expect("wire lock").take() {
                let response = ctx.response_mut();
                *response.status_mut() = 400u16.try_into()?;
                response.headers_mut().remove("content-length");
                response.headers_mut().remove("x-amzn-errortype");
                *response.body_mut() = body.into();
            }
            Ok(())
        }
    }

    fn unique_table() -> String {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!(
            "floe-test-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        )
    }

    fn moto_endpoint() -> String {
        std::env::var("FLOE_TEST_AWS_ENDPOINT").unwrap_or_else(|_| {
            panic!(
                "FLOE_TEST_AWS_ENDPOINT is not set: the DynamoDB tests need a moto server; \
                 run them through scripts/test.sh, which starts one and sets it"
            )
        })
    }

    async fn backend() -> (DynamoBackend, Arc<Wire>) {
        backend_at(moto_endpoint(), Wire::default()).await
    }

    async fn backend_at(endpoint: String, wire: Wire) -> (DynamoBackend, Arc<Wire>) {
        let sdk_config = aws_config::defaults(BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "floe-tests"))
            .load()
            .await;
        let wire = Arc::new(wire);
        let config = aws_sdk_dynamodb::config::Builder::from(&sdk_config)
            .interceptor(WireInterceptor(wire.clone()))
            .build();
        // The interceptor sees what goes on the wire: a test-only client, in
        // the backend the one public constructor would otherwise build.
        let backend = DynamoBackend {
            client: Client::from_conf(config),
            table: unique_table(),
        };
        backend.ensure_table().await.expect("create the test table");
        wire.clear();
        (backend, wire)
    }

    /// A backend whose requests reach moto one at a time, as DynamoDB
    /// applies writes to one item. moto's threaded server has no lock around
    /// a conditional write, and a failed transaction restores a copy of the
    /// whole table, undoing writes that ran meanwhile; so without this two
    /// racing writers can both "win" there. Each request gets its own
    /// connection (`connection: close`), and the proxy lets one connection
    /// at a time through.
    async fn serialized_backend() -> (DynamoBackend, Arc<Wire>) {
        let upstream = moto_endpoint();
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let address = listener.local_addr().expect("proxy address");
        let turn = Arc::new(tokio::sync::Mutex::new(()));
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let turn = turn.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let _turn = turn.lock().await;
                    if let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await {
                        // Ends when moto has answered and both sides closed.
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        let wire = Wire {
            close_connections: true,
            ..Wire::default()
        };
        backend_at(format!("http://{address}"), wire).await
    }

    fn key(kind: Kind, key: &str) -> RecordKey {
        RecordKey::new(ORG, kind, key)
    }

    fn record(kind: Kind, k: &str) -> Record {
        Record {
            key: key(kind, k),
            body: format!(r#"{{"id":"{k}"}}"#),
            version: 1,
            refs: 0,
            attrs: Attrs {
                name: Some(k.to_owned()),
                status: None,
                tags: Vec::new(),
            },
            expires_at: None,
        }
    }

    fn repo(k: &str) -> Record {
        record(Kind::Repository, k)
    }

    fn query(kind: Kind, limit: u32) -> ListQuery {
        ListQuery {
            org: ORG.to_owned(),
            kind,
            key_prefix: String::new(),
            after: None,
            limit,
            filter: Filter::default(),
        }
    }

    fn keys(page: &RecordPage) -> Vec<&str> {
        page.records.iter().map(|r| r.key.key.as_str()).collect()
    }

    fn failed(index: usize, failure: WriteFailure) -> Result<(), BackendError> {
        Err(BackendError::Failed { index, failure })
    }

    async fn create(backend: &DynamoBackend, records: &[Record]) {
        let writes = records.iter().cloned().map(Write::Create).collect();
        backend.write(writes).await.expect("create records");
    }

    async fn get(backend: &DynamoBackend, key: &RecordKey) -> Option<Record> {
        backend.get(key).await.expect("get")
    }

    #[tokio::test]
    async fn create_then_get_round_trips_every_attribute() {
        let (backend, _) = backend().await;
        let full = Record {
            key: key(Kind::Deployment, "d-1"),
            body: r#"{"name":"logs","size":"4gb"}"#.to_owned(),
            version: 1,
            refs: 3,
            attrs: Attrs {
                name: Some("logs".to_owned()),
                status: Some("running".to_owned()),
                tags: vec!["env:prod".to_owned(), "team:search".to_owned()],
            },
            expires_at: Some(now_epoch() + 3600),
        };
        let bare = Record {
            key: key(Kind::Deployment, "d-2"),
            attrs: Attrs::default(),
            ..record(Kind::Deployment, "d-2")
        };
        create(&backend, std::slice::from_ref(&full)).await;
        create(&backend, std::slice::from_ref(&bare)).await;

        assert_eq!(get(&backend, &full.key).await, Some(full.clone()));
        assert_eq!(get(&backend, &bare.key).await, Some(bare));
        assert_eq!(get(&backend, &key(Kind::Deployment, "d-3")).await, None);
        assert_eq!(get(&backend, &key(Kind::Repository, "d-1")).await, None);
        assert_eq!(
            get(&backend, &RecordKey::new("other", Kind::Deployment, "d-1")).await,
            None
        );
    }

    #[tokio::test]
    async fn tags_are_deduplicated_and_read_back_sorted() {
        let (backend, _) = backend().await;
        let mut r = repo("r");
        r.attrs.tags = vec!["b:2".to_owned(), "a:1".to_owned(), "b:2".to_owned()];
        create(&backend, std::slice::from_ref(&r)).await;
        let stored = get(&backend, &r.key).await.expect("stored");
        assert_eq!(stored.attrs.tags, vec!["a:1".to_owned(), "b:2".to_owned()]);
    }

    #[tokio::test]
    async fn creating_twice_fails_with_exists() {
        let (backend, _) = backend().await;
        create(&backend, &[repo("r")]).await;
        let mut again = repo("r");
        again.body = r#"{"other":true}"#.to_owned();
        assert_eq!(
            backend.write(vec![Write::Create(again)]).await,
            failed(0, WriteFailure::Exists)
        );
        assert_eq!(get(&backend, &repo("r").key).await, Some(repo("r")));
    }

    #[tokio::test]
    async fn an_expired_record_is_absent_and_may_be_created_again() {
        let (backend, _) = backend().await;
        let mut old = record(Kind::Idempotency, "idem-1");
        old.expires_at = Some(now_epoch() - 60);
        let live = Record {
            expires_at: Some(now_epoch() + 60),
            ..record(Kind::Idempotency, "idem-2")
        };
        // Gone from its `expires_at` second on, as in the SQLite adapter.
        let ending = Record {
            expires_at: Some(now_epoch()),
            ..record(Kind::Idempotency, "idem-3")
        };
        create(&backend, &[old.clone(), live.clone(), ending.clone()]).await;

        assert_eq!(get(&backend, &old.key).await, None);
        assert_eq!(get(&backend, &ending.key).await, None);
        let page = backend
            .list(&query(Kind::Idempotency, 10))
            .await
            .expect("list");
        assert_eq!(keys(&page), vec!["idem-2"]);
        create(&backend, &[ending]).await;

        let update = Write::Update {
            record: Record {
                version: 2,
                ..old.clone()
            },
            expected: 1,
        };
        assert_eq!(
            backend.write(vec![update]).await,
            failed(0, WriteFailure::Missing)
        );
        let refs = Write::Refs {
            key: old.key.clone(),
            delta: 1,
        };
        assert_eq!(
            backend.write(vec![refs]).await,
            failed(0, WriteFailure::Missing)
        );

        let mut fresh = old.clone();
        fresh.body = r#"{"second":true}"#.to_owned();
        fresh.expires_at = Some(now_epoch() + 60);
        create(&backend, &[fresh.clone()]).await;
        assert_eq!(get(&backend, &old.key).await, Some(fresh));
    }

    #[tokio::test]
    async fn update_checks_the_version_and_keeps_refs() {
        let (backend, _) = backend().await;
        let mut original = repo("r");
        original.attrs.status = Some("ok".to_owned());
        original.attrs.tags = vec!["env:dev".to_owned()];
        create(&backend, &[original.clone()]).await;
        backend
            .write(vec![Write::Refs {
                key: original.key.clone(),
                delta: 2,
            }])
            .await
            .expect("refs");

        // refs in the new record is ignored: only Write::Refs changes it.
        let updated = Record {
            body: r#"{"v":2}"#.to_owned(),
            version: 2,
            refs: 0,
            attrs: Attrs {
                name: Some("renamed".to_owned()),
                status: None,
                tags: Vec::new(),
            },
            expires_at: Some(now_epoch() + 600),
            ..original.clone()
        };
        backend
            .write(vec![Write::Update {
                record: updated.clone(),
                expected: 1,
            }])
            .await
            .expect("update");
        assert_eq!(
            get(&backend, &original.key).await,
            Some(Record {
                refs: 2,
                ..updated.clone()
            })
        );

        let stale = Write::Update {
            record: Record {
                version: 2,
                ..original.clone()
            },
            expected: 1,
        };
        assert_eq!(
            backend.write(vec![stale]).await,
            failed(0, WriteFailure::VersionMismatch { current: 2 })
        );
        let missing = Write::Update {
            record: Record {
                version: 2,
                ..repo("nope")
            },
            expected: 1,
        };
        assert_eq!(
            backend.write(vec![missing]).await,
            failed(0, WriteFailure::Missing)
        );
        assert_eq!(
            get(&backend, &original.key).await,
            Some(Record { refs: 2, ..updated })
        );
    }

    #[tokio::test]
    async fn refs_go_up_and_down_but_never_below_zero() {
        let (backend, _) = backend().await;
        let r = repo("r");
        create(&backend, std::slice::from_ref(&r)).await;
        let refs = |delta| {
            vec![Write::Refs {
                key: r.key.clone(),
                delta,
            }]
        };

        backend.write(refs(3)).await.expect("+3");
        backend.write(refs(-1)).await.expect("-1");
        assert_eq!(
            get(&backend, &r.key).await.map(|r| (r.refs, r.version)),
            Some((2, 1))
        );
        assert_eq!(
            backend.write(refs(-3)).await,
            failed(0, WriteFailure::Underflow)
        );
        backend.write(refs(-2)).await.expect("-2");
        assert_eq!(
            backend.write(refs(-1)).await,
            failed(0, WriteFailure::Underflow)
        );
        assert_eq!(get(&backend, &r.key).await.map(|r| r.refs), Some(0));

        let missing = vec![Write::Refs {
            key: repo("nope").key,
            delta: 1,
        }];
        assert_eq!(
            backend.write(missing).await,
            failed(0, WriteFailure::Missing)
        );
        assert_eq!(get(&backend, &repo("nope").key).await, None);
    }

    #[tokio::test]
    async fn delete_checks_version_and_references() {
        let (backend, _) = backend().await;
        let r = repo("r");
        create(&backend, &[r.clone(), repo("s")]).await;
        backend
            .write(vec![Write::Refs {
                key: r.key.clone(),
                delta: 1,
            }])
            .await
            .expect("refs");
        let delete = |expected, unreferenced| {
            vec![Write::Delete {
                key: r.key.clone(),
                expected,
                unreferenced,
            }]
        };

        assert_eq!(
            backend.write(delete(1, true)).await,
            failed(0, WriteFailure::Referenced { refs: 1 })
        );
        assert_eq!(
            backend.write(delete(7, true)).await,
            failed(0, WriteFailure::VersionMismatch { current: 1 })
        );
        assert!(get(&backend, &r.key).await.is_some());
        backend
            .write(vec![Write::Refs {
                key: r.key.clone(),
                delta: -1,
            }])
            .await
            .expect("refs");
        backend.write(delete(1, true)).await.expect("delete");
        assert_eq!(get(&backend, &r.key).await, None);
        assert_eq!(
            backend.write(delete(1, false)).await,
            failed(0, WriteFailure::Missing)
        );

        // Without `unreferenced`, references do not stop a delete.
        let s = repo("s").key;
        backend
            .write(vec![Write::Refs {
                key: s.clone(),
                delta: 4,
            }])
            .await
            .expect("refs");
        backend
            .write(vec![Write::Delete {
                key: s.clone(),
                expected: 1,
                unreferenced: false,
            }])
            .await
            .expect("delete referenced");
        assert_eq!(get(&backend, &s).await, None);
    }

    #[tokio::test]
    async fn a_batch_applies_every_write_or_none() {
        let (backend, wire) = backend().await;
        create(&backend, &[repo("existing"), repo("target")]).await;
        wire.clear();

        let batch = vec![
            Write::Create(repo("new")),
            Write::Create(repo("existing")),
            Write::Refs {
                key: repo("target").key,
                delta: 1,
            },
        ];
        assert_eq!(backend.write(batch).await, failed(1, WriteFailure::Exists));
        assert_eq!(get(&backend, &repo("new").key).await, None);
        assert_eq!(
            get(&backend, &repo("target").key).await.map(|r| r.refs),
            Some(0)
        );

        let batch = vec![
            Write::Create(repo("new")),
            Write::Refs {
                key: repo("target").key,
                delta: 1,
            },
            Write::Update {
                record: Record {
                    version: 2,
                    ..repo("existing")
                },
                expected: 1,
            },
        ];
        backend.write(batch).await.expect("batch");
        assert!(get(&backend, &repo("new").key).await.is_some());
        assert_eq!(
            get(&backend, &repo("target").key).await.map(|r| r.refs),
            Some(1)
        );
        assert_eq!(
            get(&backend, &repo("existing").key)
                .await
                .map(|r| r.version),
            Some(2)
        );

        let batch = vec![
            Write::Refs {
                key: repo("target").key,
                delta: 1,
            },
            Write::Delete {
                key: repo("target").key,
                expected: 1,
                unreferenced: true,
            },
        ];
        // Two actions on one item in one transaction are a caller's bug.
        assert!(matches!(
            backend.write(batch).await,
            Err(BackendError::Unavailable(_))
        ));

        let writes: Vec<String> = wire
            .operations()
            .into_iter()
            .filter(|op| op != "GetItem")
            .collect();
        assert_eq!(writes, vec!["TransactWriteItems"; 3]);
    }

    #[tokio::test]
    async fn the_failed_write_of_a_batch_is_reported_with_its_reason() {
        let (backend, _) = backend().await;
        create(&backend, &[repo("a"), repo("b")]).await;
        backend
            .write(vec![Write::Refs {
                key: repo("b").key,
                delta: 2,
            }])
            .await
            .expect("refs");

        let cases = [
            (
                Write::Update {
                    record: Record {
                        version: 3,
                        ..repo("a")
                    },
                    expected: 2,
                },
                WriteFailure::VersionMismatch { current: 1 },
            ),
            (
                Write::Delete {
                    key: repo("b").key,
                    expected: 1,
                    unreferenced: true,
                },
                WriteFailure::Referenced { refs: 2 },
            ),
            (
                Write::Refs {
                    key: repo("b").key,
                    delta: -5,
                },
                WriteFailure::Underflow,
            ),
            (
                Write::Refs {
                    key: repo("zz").key,
                    delta: 1,
                },
                WriteFailure::Missing,
            ),
        ];
        for (write, failure) in cases {
            let batch = vec![Write::Create(repo("c")), write];
            assert_eq!(backend.write(batch).await, failed(1, failure));
        }
        assert_eq!(get(&backend, &repo("c").key).await, None);
    }

    #[tokio::test]
    async fn a_batch_over_the_transaction_limit_is_refused_unsent() {
        let (backend, wire) = backend().await;
        let batch = (0..101)
            .map(|i| Write::Create(repo(&format!("r{i:03}"))))
            .collect();
        assert!(matches!(
            backend.write(batch).await,
            Err(BackendError::Unavailable(_))
        ));
        assert!(wire.operations().is_empty());

        let batch: Vec<Write> = (0..100)
            .map(|i| Write::Create(repo(&format!("r{i:03}"))))
            .collect();
        backend
            .write(batch)
            .await
            .expect("100 writes fit one transaction");
        assert_eq!(
            backend
                .list(&query(Kind::Repository, 1000))
                .await
                .expect("list")
                .records
                .len(),
            100
        );
    }

    #[tokio::test]
    async fn list_pages_in_key_order_with_one_query_per_page() {
        let (backend, wire) = backend().await;
        let names = ["e", "a", "d", "b", "c"];
        create(&backend, &names.map(repo)).await;
        // Neighbours that the query must leave out.
        create(
            &backend,
            &[record(Kind::Deployment, "a"), record(Kind::Policy, "z")],
        )
        .await;
        create(
            &backend,
            &[Record {
                key: RecordKey::new("other", Kind::Repository, "a0"),
                ..repo("a0")
            }],
        )
        .await;
        wire.clear();

        let mut q = query(Kind::Repository, 2);
        let mut pages = Vec::new();
        loop {
            let page = backend.list(&q).await.expect("list");
            pages.push((keys(&page).join(","), page.next.clone()));
            match page.next {
                Some(next) => q.after = Some(next),
                None => break,
            }
        }
        assert_eq!(
            pages,
            vec![
                ("a,b".to_owned(), Some("b".to_owned())),
                ("c,d".to_owned(), Some("d".to_owned())),
                ("e".to_owned(), None),
            ]
        );
        assert_eq!(wire.operations(), vec!["Query"; 3]);

        let page = backend
            .list(&query(Kind::Repository, 10))
            .await
            .expect("list");
        assert_eq!(page.records[0], repo("a"));
        assert_eq!(page.next, None);
    }

    #[tokio::test]
    async fn list_filters_by_name_status_tag_and_key_prefix() {
        let (backend, wire) = backend().await;
        let dep = |k: &str, name: &str, status: &str, tags: &[&str]| Record {
            attrs: Attrs {
                name: Some(name.to_owned()),
                status: Some(status.to_owned()),
                tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            },
            ..record(Kind::Deployment, k)
        };
        create(
            &backend,
            &[
                dep("d1", "logs-eu", "running", &["env:prod", "team:a"]),
                dep("d2", "logs-us", "stopped", &["env:dev"]),
                dep("d3", "metrics", "running", &[]),
                Record {
                    attrs: Attrs::default(),
                    ..record(Kind::Deployment, "d4")
                },
            ],
        )
        .await;
        create(
            &backend,
            &[
                record(Kind::Plan, "d1#p1"),
                record(Kind::Plan, "d1#p2"),
                record(Kind::Plan, "d10#p1"),
            ],
        )
        .await;
        wire.clear();

        let list = |filter: Filter| {
            let backend = backend.clone();
            async move {
                let q = ListQuery {
                    filter,
                    ..query(Kind::Deployment, 100)
                };
                keys(&backend.list(&q).await.expect("list")).join(",")
            }
        };
        let name = |p: &str| Filter {
            name_prefix: Some(p.to_owned()),
            ..Filter::default()
        };
        let status = |s: &str| Filter {
            status: Some(s.to_owned()),
            ..Filter::default()
        };
        let tag = |t: &str| Filter {
            tag: Some(t.to_owned()),
            ..Filter::default()
        };

        assert_eq!(list(Filter::default()).await, "d1,d2,d3,d4");
        assert_eq!(list(name("logs")).await, "d1,d2");
        assert_eq!(list(name("logs-u")).await, "d2");
        assert_eq!(list(status("running")).await, "d1,d3");
        assert_eq!(list(tag("env:prod")).await, "d1");
        assert_eq!(list(tag("env")).await, "");
        assert_eq!(
            list(Filter {
                status: Some("running".to_owned()),
                ..name("logs")
            })
            .await,
            "d1"
        );

        // A filter applies after the limit: a page may hold fewer matches
        // than the limit while more follow.
        let q = ListQuery {
            filter: status("running"),
            ..query(Kind::Deployment, 2)
        };
        let page = backend.list(&q).await.expect("list");
        assert_eq!(
            (keys(&page), page.next.as_deref()),
            (vec!["d1"], Some("d2"))
        );

        let plans = ListQuery {
            key_prefix: "d1#".to_owned(),
            ..query(Kind::Plan, 100)
        };
        let page = backend.list(&plans).await.expect("list");
        assert_eq!(keys(&page), vec!["d1#p1", "d1#p2"]);
        assert!(wire.operations().iter().all(|op| op == "Query"));
    }

    #[tokio::test]
    async fn list_continues_after_a_given_key() {
        let (backend, _) = backend().await;
        create(&backend, &["a", "b", "c", "d", "e"].map(repo)).await;
        create(
            &backend,
            &[
                record(Kind::Plan, "d1#p1"),
                record(Kind::Plan, "d1#p2"),
                record(Kind::Plan, "d2#p1"),
            ],
        )
        .await;
        let after = |kind, prefix: &str, after: &str| {
            let backend = backend.clone();
            let q = ListQuery {
                key_prefix: prefix.to_owned(),
                after: Some(after.to_owned()),
                ..query(kind, 100)
            };
            async move { keys(&backend.list(&q).await.expect("list")).join(",") }
        };

        assert_eq!(after(Kind::Repository, "", "b").await, "c,d,e");
        assert_eq!(after(Kind::Repository, "", "bb").await, "c,d,e");
        assert_eq!(after(Kind::Repository, "", "e").await, "");
        assert_eq!(after(Kind::Repository, "", "").await, "a,b,c,d,e");
        assert_eq!(after(Kind::Plan, "d1#", "d1#p1").await, "d1#p2");
        // Cursors outside the prefix: before it starts over, past it is the end.
        assert_eq!(after(Kind::Plan, "d1#", "a").await, "d1#p1,d1#p2");
        assert_eq!(after(Kind::Plan, "d1#", "d2#p0").await, "");
        // The cursor is only a key: it cannot reach another kind or org.
        assert_eq!(after(Kind::Plan, "", "\u{10FFFF}").await, "");
    }

    #[tokio::test]
    async fn of_two_concurrent_updates_exactly_one_wins() {
        let (backend, _) = serialized_backend().await;
        create(&backend, &[repo("r"), repo("s"), repo("t")]).await;
        let update = |body: &str| Write::Update {
            record: Record {
                body: body.to_owned(),
                version: 2,
                ..repo("r")
            },
            expected: 1,
        };

        let (a, b) = tokio::join!(
            backend.write(vec![update(r#"{"by":"a"}"#)]),
            backend.write(vec![update(r#"{"by":"b"}"#)])
        );
        let mismatch = failed(0, WriteFailure::VersionMismatch { current: 2 });
        assert!(
            (a.is_ok() && b == mismatch) || (b.is_ok() && a == mismatch),
            "a: {a:?}, b: {b:?}"
        );

        // The same race inside transactions.
        let with = |other: &str, body: &str| {
            vec![
                Write::Refs {
                    key: repo(other).key,
                    delta: 1,
                },
                Write::Update {
                    record: Record {
                        body: body.to_owned(),
                        version: 3,
                        ..repo("r")
                    },
                    expected: 2,
                },
            ]
        };
        let (a, b) = tokio::join!(
            backend.write(with("s", r#"{"by":"c"}"#)),
            backend.write(with("t", r#"{"by":"d"}"#))
        );
        let mismatch = failed(1, WriteFailure::VersionMismatch { current: 3 });
        assert!(
            (a.is_ok() && b == mismatch) || (b.is_ok() && a == mismatch),
            "a: {a:?}, b: {b:?}"
        );
        let refs_s = get(&backend, &repo("s").key).await.map(|r| r.refs);
        let refs_t = get(&backend, &repo("t").key).await.map(|r| r.refs);
        assert_eq!(refs_s.zip(refs_t).map(|(s, t)| s + t), Some(1));
    }

    #[tokio::test]
    async fn a_write_that_loses_a_transaction_race_is_retried() {
        let (backend, wire) = backend().await;
        wire.inject(2, "TransactionConflict");
        create(&backend, &[repo("a"), repo("b")]).await;
        assert_eq!(wire.operations(), vec!["TransactWriteItems"; 3]);
        assert!(get(&backend, &repo("a").key).await.is_some());

        // A single write is a transaction too (see `write_once`).
        wire.clear();
        wire.inject(1, "ThrottlingError");
        let refs = Write::Refs {
            key: repo("a").key,
            delta: 1,
        };
        backend.write(vec![refs]).await.expect("refs");
        assert_eq!(wire.operations(), vec!["TransactWriteItems"; 2]);
        assert_eq!(get(&backend, &repo("a").key).await.map(|r| r.refs), Some(1));
    }

    #[tokio::test]
    async fn a_write_that_keeps_conflicting_is_unavailable() {
        let (backend, wire) = backend().await;
        wire.inject(100, "TransactionConflict");
        let result = backend
            .write(vec![Write::Create(repo("a")), Write::Create(repo("b"))])
            .await;
        match result {
            Err(BackendError::Unavailable(message)) => {
                assert!(message.contains("TransactionConflict"), "{message}");
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
        assert_eq!(wire.operations().len(), WRITE_ATTEMPTS as usize);

        // Other cancellations are not worth a retry.
        wire.clear();
        wire.inject(100, "ValidationError");
        let result = backend.write(vec![Write::Create(repo("a"))]).await;
        match result {
            Err(BackendError::Unavailable(message)) => {
                assert!(message.contains("ValidationError"), "{message}");
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
        assert_eq!(wire.operations().len(), 1);

        wire.inject(0, "None");
        assert_eq!(get(&backend, &repo("a").key).await, None);
    }

    #[tokio::test]
    async fn unreadable_items_are_corrupt() {
        let (backend, _) = backend().await;
        let mut item = record_item(&repo("bad-body"));
        item.insert(BODY.to_owned(), AttributeValue::N("1".to_owned()));
        let mut huge = record_item(&repo("bad-version"));
        huge.insert(VERSION.to_owned(), AttributeValue::N("-1".to_owned()));
        for item in [item, huge] {
            backend
                .client
                .put_item()
                .table_name(backend.table())
                .set_item(Some(item))
                .send()
                .await
                .expect("put a hand-made item");
        }
        for k in ["bad-body", "bad-version"] {
            assert!(
                matches!(
                    backend.get(&repo(k).key).await,
                    Err(BackendError::Corrupt(_))
                ),
                "{k}"
            );
        }
        assert!(matches!(
            backend.list(&query(Kind::Repository, 10)).await,
            Err(BackendError::Corrupt(_))
        ));
    }

    #[tokio::test]
    async fn ensure_table_is_idempotent_and_enables_ttl() {
        let (backend, _) = backend().await;
        backend.ensure_table().await.expect("second ensure_table");
        create(&backend, &[repo("a")]).await;
        backend.ensure_table().await.expect("third ensure_table");
        assert!(get(&backend, &repo("a").key).await.is_some());

        let ttl = backend
            .client
            .describe_time_to_live()
            .table_name(backend.table())
            .send()
            .await
            .expect("describe TTL");
        let ttl = ttl.time_to_live_description().expect("a TTL description");
        assert_eq!(ttl.time_to_live_status(), Some(&TimeToLiveStatus::Enabled));
        assert_eq!(ttl.attribute_name(), Some(EXPIRES_AT));
    }
}
