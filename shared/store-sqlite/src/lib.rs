//! The embedded default: every record in one SQLite table, mirroring the
//! DynamoDB single-table layout so that both adapters behave alike.

use async_trait::async_trait;
use floe_store::backend::{
    Attrs, Backend, BackendError, Kind, ListQuery, Record, RecordKey, RecordPage, Write,
    WriteFailure, now_epoch,
};
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Separates tags in the `tags` column; a control character cannot occur in
/// a validated tag, so `instr` on `SEP tag SEP` is an exact match.
const SEP: char = '\u{1f}';

pub struct SqliteBackend {
    // One connection: SQLite serialises writers anyway, and the control
    // plane's write rate is tiny. Blocking calls run on the blocking pool.
    conn: Arc<Mutex<Connection>>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS records (
    org TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    body TEXT NOT NULL,
    version INTEGER NOT NULL,
    refs INTEGER NOT NULL DEFAULT 0,
    name TEXT,
    status TEXT,
    tags TEXT NOT NULL DEFAULT '',
    expires_at INTEGER,
    PRIMARY KEY (org, kind, key)
) WITHOUT ROWID;
";

fn unavailable(e: impl std::fmt::Display) -> BackendError {
    BackendError::Unavailable(format!("sqlite: {e}"))
}

impl SqliteBackend {
    /// Opens (creating if needed) the database file and its schema.
    pub fn open(path: &Path) -> Result<SqliteBackend, BackendError> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(unavailable)?;
        }
        let conn = Connection::open(path).map_err(unavailable)?;
        Self::init(conn)
    }

    pub fn in_memory() -> Result<SqliteBackend, BackendError> {
        Self::init(Connection::open_in_memory().map_err(unavailable)?)
    }

    fn init(conn: Connection) -> Result<SqliteBackend, BackendError> {
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(unavailable)?;
        // WAL lets a reader (say, `sqlite3` poking at a local install) not block the server.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(unavailable)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(unavailable)?;
        conn.execute_batch(SCHEMA).map_err(unavailable)?;
        Ok(SqliteBackend {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    async fn with_conn<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, BackendError> + Send + 'static,
    ) -> Result<T, BackendError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = conn
                .lock()
                .map_err(|_| unavailable("connection lock poisoned"))?;
            f(&mut guard)
        })
        .await
        .map_err(unavailable)?
    }
}

fn tags_column(tags: &[String]) -> String {
    if tags.is_empty() {
        return String::new();
    }
    let mut s = String::from(SEP);
    for t in tags {
        s.push_str(t);
        s.push(SEP);
    }
    s
}

fn row_to_record(org: &str, kind: Kind, row: &rusqlite::Row<'_>) -> rusqlite::Result<Record> {
    let tags: String = row.get("tags")?;
    let version: i64 = row.get("version")?;
    let refs: i64 = row.get("refs")?;
    Ok(Record {
        key: RecordKey {
            org: org.to_string(),
            kind,
            key: row.get("key")?,
        },
        body: row.get("body")?,
        version: u64::try_from(version).unwrap_or(0),
        refs: u64::try_from(refs).unwrap_or(0),
        attrs: Attrs {
            name: row.get("name")?,
            status: row.get("status")?,
            tags: tags
                .split(SEP)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
        },
        expires_at: row.get("expires_at")?,
    })
}

fn to_i64(v: u64) -> Result<i64, BackendError> {
    i64::try_from(v).map_err(|_| BackendError::Corrupt(format!("number {v} out of range")))
}

/// Current version, refs and expiry of a row, if it exists.
fn current(
    tx: &Transaction<'_>,
    key: &RecordKey,
) -> Result<Option<(u64, u64, Option<i64>)>, BackendError> {
    tx.query_row(
        "SELECT version, refs, expires_at FROM records WHERE org = ?1 AND kind = ?2 AND key = ?3",
        params![key.org, key.kind.prefix(), key.key],
        |r| {
            let v: i64 = r.get(0)?;
            let refs: i64 = r.get(1)?;
            Ok((
                u64::try_from(v).unwrap_or(0),
                u64::try_from(refs).unwrap_or(0),
                r.get(2)?,
            ))
        },
    )
    .optional()
    .map_err(unavailable)
}

fn apply(
    tx: &Transaction<'_>,
    write: &Write,
    now: i64,
) -> Result<Result<(), WriteFailure>, BackendError> {
    match write {
        Write::Create(r) => {
            if let Some((_, _, expires)) = current(tx, &r.key)? {
                if expires.is_none_or(|e| e > now) {
                    return Ok(Err(WriteFailure::Exists));
                }
                tx.execute(
                    "DELETE FROM records WHERE org = ?1 AND kind = ?2 AND key = ?3",
                    params![r.key.org, r.key.kind.prefix(), r.key.key],
                )
                .map_err(unavailable)?;
            }
            tx.execute(
                "INSERT INTO records (org, kind, key, body, version, refs, name, status, tags, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    r.key.org,
                    r.key.kind.prefix(),
                    r.key.key,
                    r.body,
                    to_i64(r.version)?,
                    to_i64(r.refs)?,
                    r.attrs.name,
                    r.attrs.status,
                    tags_column(&r.attrs.tags),
                    r.expires_at
                ],
            )
            .map_err(unavailable)?;
            Ok(Ok(()))
        }
        Write::Update {
            record: r,
            expected,
        } => {
            let changed = tx
                .execute(
                    "UPDATE records SET body = ?4, version = ?5, name = ?6, status = ?7, tags = ?8, expires_at = ?9
                     WHERE org = ?1 AND kind = ?2 AND key = ?3 AND version = ?10",
                    params![
                        r.key.org,
                        r.key.kind.prefix(),
                        r.key.key,
                        r.body,
                        to_i64(r.version)?,
                        r.attrs.name,
                        r.attrs.status,
                        tags_column(&r.attrs.tags),
                        r.expires_at,
                        to_i64(*expected)?
                    ],
                )
                .map_err(unavailable)?;
            if changed == 1 {
                return Ok(Ok(()));
            }
            Ok(Err(match current(tx, &r.key)? {
                None => WriteFailure::Missing,
                Some((v, _, _)) => WriteFailure::VersionMismatch { current: v },
            }))
        }
        Write::Delete {
            key,
            expected,
            unreferenced,
        } => {
            let Some((v, refs, _)) = current(tx, key)? else {
                return Ok(Err(WriteFailure::Missing));
            };
            if v != *expected {
                return Ok(Err(WriteFailure::VersionMismatch { current: v }));
            }
            if *unreferenced && refs > 0 {
                return Ok(Err(WriteFailure::Referenced { refs }));
            }
            tx.execute(
                "DELETE FROM records WHERE org = ?1 AND kind = ?2 AND key = ?3",
                params![key.org, key.kind.prefix(), key.key],
            )
            .map_err(unavailable)?;
            Ok(Ok(()))
        }
        Write::Refs { key, delta } => add_refs(tx, key, *delta, None),
        Write::RefsAt {
            key,
            delta,
            expected,
        } => add_refs(tx, key, *delta, Some(*expected)),
    }
}

/// `Refs` and `RefsAt`: `delta` added to the record's refs, never below
/// zero, and with `expected` only while the record is at that version.
fn add_refs(
    tx: &Transaction<'_>,
    key: &RecordKey,
    delta: i64,
    expected: Option<u64>,
) -> Result<Result<(), WriteFailure>, BackendError> {
    let Some((version, refs, _)) = current(tx, key)? else {
        return Ok(Err(WriteFailure::Missing));
    };
    if let Some(expected) = expected
        && version != expected
    {
        return Ok(Err(WriteFailure::VersionMismatch { current: version }));
    }
    let next = i128::from(refs) + i128::from(delta);
    if next < 0 {
        return Ok(Err(WriteFailure::Underflow));
    }
    tx.execute(
        "UPDATE records SET refs = ?4 WHERE org = ?1 AND kind = ?2 AND key = ?3",
        params![
            key.org,
            key.kind.prefix(),
            key.key,
            i64::try_from(next).unwrap_or(i64::MAX)
        ],
    )
    .map_err(unavailable)?;
    Ok(Ok(()))
}

#[async_trait]
impl Backend for SqliteBackend {
    async fn get(&self, key: &RecordKey) -> Result<Option<Record>, BackendError> {
        let key = key.clone();
        self.with_conn(move |c| {
            c.query_row(
                "SELECT key, body, version, refs, name, status, tags, expires_at FROM records
                 WHERE org = ?1 AND kind = ?2 AND key = ?3 AND (expires_at IS NULL OR expires_at > ?4)",
                params![key.org, key.kind.prefix(), key.key, now_epoch()],
                |row| row_to_record(&key.org, key.kind, row),
            )
            .optional()
            .map_err(unavailable)
        })
        .await
    }

    async fn list(&self, q: &ListQuery) -> Result<RecordPage, BackendError> {
        let q = q.clone();
        self.with_conn(move |c| {
            // Mirrors a DynamoDB Query with Limit: examine `limit` records in
            // key order, then filter; `next` is the last key examined.
            let prefix_end = format!("{}\u{10FFFF}", q.key_prefix);
            let after = q.after.clone().unwrap_or_default();
            let mut stmt = c
                .prepare_cached(
                    "SELECT key, body, version, refs, name, status, tags, expires_at FROM records
                     WHERE org = ?1 AND kind = ?2 AND key >= ?3 AND key < ?4 AND key > ?5
                     ORDER BY key LIMIT ?6",
                )
                .map_err(unavailable)?;
            let rows = stmt
                .query_map(
                    params![
                        q.org,
                        q.kind.prefix(),
                        q.key_prefix,
                        prefix_end,
                        after,
                        i64::from(q.limit) + 1
                    ],
                    |row| row_to_record(&q.org, q.kind, row),
                )
                .map_err(unavailable)?;
            let mut examined = Vec::new();
            for r in rows {
                examined.push(r.map_err(unavailable)?);
            }
            let more = examined.len() > q.limit as usize;
            examined.truncate(q.limit as usize);
            let next = if more {
                examined.last().map(|r| r.key.key.clone())
            } else {
                None
            };
            let now = now_epoch();
            let records = examined
                .into_iter()
                .filter(|r| r.expires_at.is_none_or(|e| e > now) && q.filter.matches(&r.attrs))
                .collect();
            Ok(RecordPage { records, next })
        })
        .await
    }

    async fn write(&self, writes: Vec<Write>) -> Result<(), BackendError> {
        self.with_conn(move |c| {
            let tx = c.transaction().map_err(unavailable)?;
            let now = now_epoch();
            for (index, w) in writes.iter().enumerate() {
                if let Err(failure) = apply(&tx, w, now)? {
                    // Dropping the transaction rolls every earlier write back.
                    return Err(BackendError::Failed { index, failure });
                }
            }
            tx.commit().map_err(unavailable)
        })
        .await
    }
}
