//! The embedded default: every record in one SQLite table, mirroring the
//! DynamoDB single-table layout so that both adapters behave alike.

use async_trait::async_trait;
use floe_store::backend::{
    Attrs, Backend, BackendError, Kind, ListQuery, Record, RecordKey, RecordPage, Write,
    WriteFailure, now_epoch,
};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, params};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Separates tags in the `tags` column; a control character cannot occur in
/// a validated tag, so `instr` on `SEP tag SEP` is an exact match.
const SEP: char = '\u{1f}';

pub struct SqliteBackend {
    // One writing connection: SQLite serialises writers anyway, and the
    // control plane's write rate is tiny. Writes run on the blocking pool.
    // An in-memory database has only this connection, for its reads too
    // (another connection would open another database).
    conn: Arc<Mutex<Connection>>,
    // Reads of a file have read-only connections of their own (see
    // `with_reader`), so they neither queue behind one another on `conn`
    // nor wait for a write. In WAL mode each read statement runs in a read
    // transaction of its own, which sees every transaction committed before
    // it began: a read made after a write returned sees that write, as it
    // did on the one connection.
    readers: Option<Arc<Readers>>,
    /// What tells readers that nothing was written (see
    /// [`Backend::quiet_mark`]).
    writes: Arc<WriteCounts>,
}

/// A small pool of read-only connections to the database file, opened on
/// first use and kept.
struct Readers {
    path: PathBuf,
    max: usize,
    state: Mutex<ReadersState>,
    freed: Condvar,
}

struct ReadersState {
    idle: Vec<Connection>,
    /// Connections in existence: idle, lent out, or being opened.
    open: usize,
    /// Threads waiting in [`Readers::take`] for a connection. A notify on
    /// std's `Condvar` is a system call whether or not anyone waits, and a
    /// connection goes back after every read: counting the waiters keeps
    /// that call off the read path, where nobody waits but under overload.
    waiting: usize,
}

/// A connection lent out by [`Readers`]; it goes back to the pool when
/// dropped, also when the read using it panicked.
struct Lent<'a> {
    pool: &'a Readers,
    conn: Option<Connection>,
}

impl Lent<'_> {
    fn conn(&self) -> Result<&Connection, BackendError> {
        self.conn
            .as_ref()
            .ok_or_else(|| unavailable("reader given back before its read"))
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.give_back(conn);
        }
    }
}

fn poisoned() -> BackendError {
    unavailable("reader pool lock poisoned")
}

impl Readers {
    fn new(path: PathBuf) -> Readers {
        // Reads run on the runtime's worker threads (one per core) and,
        // when none is idle, on the blocking pool: a few more than cores
        // covers both without keeping many page caches.
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        Readers {
            path,
            max: (cores + 2).clamp(4, 16),
            state: Mutex::new(ReadersState {
                idle: Vec::new(),
                open: 0,
                waiting: 0,
            }),
            freed: Condvar::new(),
        }
    }

    /// An idle connection, if one is: never waits, never opens a file.
    fn take_idle(&self) -> Result<Option<Lent<'_>>, BackendError> {
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        Ok(state.idle.pop().map(|conn| Lent {
            pool: self,
            conn: Some(conn),
        }))
    }

    /// An idle connection, a new one while fewer than `max` exist, or the
    /// next one given back. Blocks: for the blocking pool only.
    fn take(&self) -> Result<Lent<'_>, BackendError> {
        let mut state = self.state.lock().map_err(|_| poisoned())?;
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(Lent {
                    pool: self,
                    conn: Some(conn),
                });
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return match open_reader(&self.path) {
                    Ok(conn) => Ok(Lent {
                        pool: self,
                        conn: Some(conn),
                    }),
                    Err(e) => {
                        self.forget_one();
                        Err(e)
                    }
                };
            }
            state.waiting += 1;
            let woken = self.freed.wait(state);
            state = woken.map_err(|_| poisoned())?;
            state.waiting -= 1;
        }
    }

    fn give_back(&self, conn: Connection) {
        let wake = match self.state.lock() {
            Ok(mut state) => {
                state.idle.push(conn);
                state.waiting > 0
            }
            // Nothing can be trusted in a poisoned pool: the connection is
            // closed, and `take` reports the poison to its callers.
            Err(_) => return,
        };
        if wake {
            self.freed.notify_one();
        }
    }

    /// A connection that failed to open no longer counts against `max`.
    fn forget_one(&self) {
        let wake = match self.state.lock() {
            Ok(mut state) => {
                state.open = state.open.saturating_sub(1);
                state.waiting > 0
            }
            // A poisoned pool: a waiter woken reports the poison.
            Err(_) => true,
        };
        if wake {
            self.freed.notify_one();
        }
    }
}

/// Read-only: a bug in a read path cannot write. The writing connection has
/// made the file WAL before any reader opens, and keeps it open, so the
/// readers share its WAL index (in this process's memory: see [`VFS`]).
///
/// No busy timeout: a WAL reader never waits for the writer, and in the
/// rare states where SQLite answers a reader SQLITE_BUSY (another
/// connection recovering the WAL, say) the read is made again on the
/// writing connection, which waits (see `with_reader`). So a read on a
/// worker thread never sleeps in SQLite's busy handler.
fn open_reader(path: &Path) -> Result<Connection, BackendError> {
    let conn = Connection::open_with_flags_and_vfs(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        VFS,
    )
    .map_err(unavailable)?;
    conn.busy_timeout(std::time::Duration::ZERO)
        .map_err(unavailable)?;
    stable_plans(&conn)?;
    Ok(conn)
}

/// The query planner's stability guarantee: plans depend on the schema
/// only, not on the values bound. Without it the bundled SQLite (built
/// with STAT4) marks the list statement to be prepared again whenever its
/// parameters are bound, that is on every call (some 6% of a page of 100
/// deployments' time under load); each statement here has one good plan, the primary key's.
fn stable_plans(conn: &Connection) -> Result<(), BackendError> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(unavailable)?;
    Ok(())
}

/// SQLite's unix VFS for one process: the first connection locks the file
/// against every other process, and the WAL index lives in this process's
/// memory rather than in a shared `-shm` file. Two things follow:
/// - Each read's read transaction takes its WAL locks with a mutex instead
///   of two `fcntl` calls on the `-shm` file, which were a tenth of a warm
///   read's time.
/// - A second server started on the same data directory is refused at once
///   (see [`SqliteBackend::open`]) instead of running a second worker and
///   scheduler over the same records.
///
/// The file format is unchanged: the `sqlite3` shell opens the file once
/// Floe has stopped.
const VFS: &str = "unix-excl";

/// How long the writing connection waits for a lock another one holds.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
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

/// The records (sealed credentials among them) are for this user alone:
/// the file is made 0600, and so are its journal files, which SQLite
/// creates with the database file's mode (a `-wal` or `-shm` already
/// there from an older run is tightened too).
fn owner_only(path: &Path) -> Result<(), BackendError> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = vec![path.to_path_buf()];
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_os_string();
        name.push(suffix);
        files.push(name.into());
    }
    for file in files.iter().filter(|f| f.exists()) {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
            .map_err(unavailable)?;
    }
    Ok(())
}

impl SqliteBackend {
    /// Opens (creating if needed) the database file and its schema.
    pub fn open(path: &Path) -> Result<SqliteBackend, BackendError> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(unavailable)?;
        }
        // Readers open the file later, by this name: made absolute now so
        // that a change of working directory cannot point them elsewhere.
        let path = std::path::absolute(path).map_err(unavailable)?;
        let conn = Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), VFS)
            .map_err(unavailable)?;
        owner_only(&path)?;
        // The first statement takes the process's lock on the file. Another
        // process holding it is not a lock to wait for (it is held until
        // that process exits), so it is asked for without waiting.
        conn.busy_timeout(std::time::Duration::ZERO)
            .map_err(unavailable)?;
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
            .map_err(|e| {
                if is_busy(&e) {
                    BackendError::Unavailable(format!(
                        "sqlite: {} is in use by another process (another Floe on the same data directory?)",
                        path.display()
                    ))
                } else {
                    unavailable(e)
                }
            })?;
        // The file exists now: its canonical name is the same for every
        // spelling of its path (a link, `..`).
        let file = std::fs::canonicalize(&path).map_err(unavailable)?;
        let mut backend = Self::init(conn, WriteCounts::of_file(&file))?;
        backend.readers = Some(Arc::new(Readers::new(path)));
        Ok(backend)
    }

    pub fn in_memory() -> Result<SqliteBackend, BackendError> {
        Self::init(
            Connection::open_in_memory().map_err(unavailable)?,
            WriteCounts::new(),
        )
    }

    fn init(conn: Connection, writes: Arc<WriteCounts>) -> Result<SqliteBackend, BackendError> {
        conn.busy_timeout(BUSY_TIMEOUT).map_err(unavailable)?;
        stable_plans(&conn)?;
        // WAL lets the read connections run while a write is under way.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(unavailable)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(unavailable)?;
        conn.execute_batch(SCHEMA).map_err(unavailable)?;
        Ok(SqliteBackend {
            conn: Arc::new(Mutex::new(conn)),
            readers: None,
            writes,
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

    /// Runs the read `f` on a read connection, or on the one connection of
    /// an in-memory database. `f` must not leave a statement running (every
    /// statement is reset or dropped when it returns): an open statement
    /// would keep its read transaction, and the connection's next read
    /// would see the database as it was then.
    ///
    /// With an idle read connection at hand, `f` runs here, on the calling
    /// worker thread, rather than on the blocking pool. A read of a WAL
    /// database takes no lock a writer holds, and from the page cache it
    /// costs microseconds: less than handing it to a blocking thread and
    /// back, which (with the one shared connection) was most of a read's
    /// time under load. Local mode's database is small and its pages stay
    /// cached; a read that has to wait (no idle connection, or SQLITE_BUSY)
    /// goes to the blocking pool.
    async fn with_reader<T, F>(&self, f: F) -> Result<T, BackendError>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let Some(readers) = &self.readers else {
            return self.with_conn(move |c| f(c).map_err(unavailable)).await;
        };
        if let Some(lent) = readers.take_idle()? {
            match f(lent.conn()?) {
                Err(e) if is_busy(&e) => {}
                done => return done.map_err(unavailable),
            }
        }
        let readers = readers.clone();
        let writer = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let lent = readers.take()?;
            match f(lent.conn()?) {
                Err(e) if is_busy(&e) => {
                    drop(lent);
                    let guard = writer
                        .lock()
                        .map_err(|_| unavailable("connection lock poisoned"))?;
                    f(&guard).map_err(unavailable)
                }
                done => done.map_err(unavailable),
            }
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

// The reads' two statements. Their columns are in the order that
// `row_to_record` takes them by position (a lookup by name compares every
// column's name, for every value of every row).
const GET_SQL: &str = "SELECT key, body, version, refs, name, status, tags, expires_at FROM records
     WHERE org = ?1 AND kind = ?2 AND key = ?3 AND (expires_at IS NULL OR expires_at > ?4)";
const LIST_SQL: &str =
    "SELECT key, body, version, refs, name, status, tags, expires_at FROM records
     WHERE org = ?1 AND kind = ?2 AND key >= ?3 AND key < ?4 AND key > ?5
     ORDER BY key LIMIT ?6";

fn row_to_record(org: &str, kind: Kind, row: &rusqlite::Row<'_>) -> rusqlite::Result<Record> {
    let key: String = row.get(0)?;
    let body: String = row.get(1)?;
    let version: i64 = row.get(2)?;
    let refs: i64 = row.get(3)?;
    let name: Option<String> = row.get(4)?;
    let status: Option<String> = row.get(5)?;
    let tags: String = row.get(6)?;
    let expires_at: Option<i64> = row.get(7)?;
    Ok(Record {
        key: RecordKey {
            org: org.to_string(),
            kind,
            key,
        },
        body,
        version: u64::try_from(version).unwrap_or(0),
        refs: u64::try_from(refs).unwrap_or(0),
        attrs: Attrs {
            name,
            status,
            tags: tags
                .split(SEP)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
        },
        expires_at,
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

/// Writes begun and ended on one database, for [`Backend::quiet_mark`].
/// The file's lock (see [`VFS`]) makes this process its only writer, and
/// every write goes through [`SqliteBackend::write`], so these counters see
/// every change. Both start at 1: a mark is never 0.
struct WriteCounts {
    begun: AtomicU64,
    ended: AtomicU64,
}

impl WriteCounts {
    fn new() -> Arc<WriteCounts> {
        Arc::new(WriteCounts {
            begun: AtomicU64::new(1),
            ended: AtomicU64::new(1),
        })
    }

    /// The counts of the file at `path`, shared by every backend of this
    /// process that has it open: two backends may open one file, and
    /// each must see the other's writes.
    fn of_file(path: &Path) -> Arc<WriteCounts> {
        static FILES: Mutex<Vec<(PathBuf, std::sync::Weak<WriteCounts>)>> = Mutex::new(Vec::new());
        // A panic elsewhere while the list was locked leaves it whole (its
        // changes are single pushes and removals): use it all the same,
        // since counts of this backend's own would miss another's writes.
        let mut files = FILES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        files.retain(|(_, counts)| counts.strong_count() > 0);
        if let Some(counts) = files
            .iter()
            .find(|(p, _)| p == path)
            .and_then(|(_, c)| c.upgrade())
        {
            return counts;
        }
        let counts = WriteCounts::new();
        files.push((path.to_path_buf(), Arc::downgrade(&counts)));
        counts
    }

    /// Counts a write as begun until the guard drops: a write ends when
    /// its closure returns or panics, committed or not.
    fn begin(self: &Arc<Self>) -> WriteUnderWay {
        self.begun.fetch_add(1, Ordering::SeqCst);
        WriteUnderWay(self.clone())
    }

    fn quiet_mark(&self) -> Option<u64> {
        // Ended first: if begun then equals it, no write was under way
        // when begun was read (ended never passes begun).
        let ended = self.ended.load(Ordering::SeqCst);
        let begun = self.begun.load(Ordering::SeqCst);
        (begun == ended).then_some(begun)
    }
}

struct WriteUnderWay(Arc<WriteCounts>);

impl Drop for WriteUnderWay {
    fn drop(&mut self) {
        self.0.ended.fetch_add(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    fn quiet_mark(&self) -> Option<u64> {
        self.writes.quiet_mark()
    }

    async fn get(&self, key: &RecordKey) -> Result<Option<Record>, BackendError> {
        let key = key.clone();
        self.with_reader(move |c| {
            // Cached: preparing the statement again would cost more than
            // running it on a warm page cache.
            c.prepare_cached(GET_SQL)?
                .query_row(
                    params![key.org, key.kind.prefix(), key.key, now_epoch()],
                    |row| row_to_record(&key.org, key.kind, row),
                )
                .optional()
        })
        .await
    }

    async fn list(&self, q: &ListQuery) -> Result<RecordPage, BackendError> {
        // Mirrors a DynamoDB Query with Limit: examine `limit` records in
        // key order, then filter; `next` is the last key examined.
        let limit = q.limit as usize;
        let q = q.clone();
        let filter = q.filter.clone();
        let mut examined = self
            .with_reader(move |c| {
                let prefix_end = format!("{}\u{10FFFF}", q.key_prefix);
                let after = q.after.as_deref().unwrap_or_default();
                let mut stmt = c.prepare_cached(LIST_SQL)?;
                let rows = stmt.query_map(
                    params![
                        q.org,
                        q.kind.prefix(),
                        q.key_prefix,
                        prefix_end,
                        after,
                        i64::from(q.limit) + 1
                    ],
                    |row| row_to_record(&q.org, q.kind, row),
                )?;
                rows.collect::<rusqlite::Result<Vec<Record>>>()
            })
            .await?;
        let more = examined.len() > limit;
        examined.truncate(limit);
        let next = if more {
            examined.last().map(|r| r.key.key.clone())
        } else {
            None
        };
        let now = now_epoch();
        let records = examined
            .into_iter()
            .filter(|r| r.expires_at.is_none_or(|e| e > now) && filter.matches(&r.attrs))
            .collect();
        Ok(RecordPage { records, next })
    }

    async fn write(&self, writes: Vec<Write>) -> Result<(), BackendError> {
        let counts = self.writes.clone();
        self.with_conn(move |c| {
            // Counted on the blocking thread, which runs the write to its
            // end even when the caller stops waiting.
            let _under_way = counts.begin();
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

#[cfg(test)]
mod tests {
    use super::*;
    use floe_store::backend::Filter;

    /// A read that finds every connection lent waits for the next one given
    /// back, and is woken by it: the notify is skipped only when nobody
    /// waits.
    #[test]
    fn a_read_waiting_for_a_connection_is_woken_when_one_comes_back()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("floe.db");
        let _writer = SqliteBackend::open(&path)?;
        let readers = Arc::new(Readers {
            max: 1,
            ..Readers::new(path)
        });
        let held = readers.take()?;
        let waiter = {
            let readers = readers.clone();
            std::thread::spawn(move || -> Result<i64, String> {
                let lent = readers.take().map_err(|e| e.to_string())?;
                let conn = lent.conn().map_err(|e| e.to_string())?;
                conn.query_row("SELECT 1", [], |row| row.get(0))
                    .map_err(|e| e.to_string())
            })
        };
        while readers.state.lock().map_err(|e| e.to_string())?.waiting == 0 {
            std::thread::yield_now();
        }
        drop(held);
        let answer = waiter.join().map_err(|_| "the waiting read panicked")??;
        assert_eq!(answer, 1);
        let state = readers.state.lock().map_err(|e| e.to_string())?;
        assert_eq!((state.waiting, state.open, state.idle.len()), (0, 1, 1));
        Ok(())
    }

    /// Without the planner's stability guarantee, binding the list's
    /// parameters expires the statement, and each page prepares it again.
    #[tokio::test]
    async fn the_list_statement_is_prepared_once() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let backend = SqliteBackend::open(&dir.path().join("floe.db"))?;
        let query = ListQuery {
            org: "o".into(),
            kind: Kind::Policy,
            key_prefix: String::new(),
            after: None,
            limit: 100,
            filter: Filter::default(),
        };
        for _ in 0..3 {
            backend.list(&query).await?;
        }
        let readers = backend.readers.as_ref().ok_or("a file has readers")?;
        let lent = readers.take()?;
        let stmt = lent.conn()?.prepare_cached(LIST_SQL)?;
        assert_eq!(stmt.get_status(rusqlite::StatementStatus::RePrepare), 0);
        Ok(())
    }
}
