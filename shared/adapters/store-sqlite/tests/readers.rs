//! Reads of a database file go to read-only connections of their own: they
//! must still see every write that returned before them, whichever
//! connection of the pool they get, and never a write not yet committed.

use floe_store::Backend;
use floe_store::backend::{Attrs, Filter, Kind, ListQuery, Record, RecordKey, Write};
use floe_store_sqlite::SqliteBackend;
use std::sync::Arc;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn record(org: &str, key: &str, body: &str, version: u64) -> Record {
    Record {
        key: RecordKey::new(org, Kind::Policy, key),
        body: body.to_string(),
        version,
        refs: 0,
        attrs: Attrs {
            name: Some(key.to_string()),
            ..Attrs::default()
        },
        expires_at: None,
    }
}

fn page_of(org: &str) -> ListQuery {
    ListQuery {
        org: org.to_string(),
        kind: Kind::Policy,
        key_prefix: String::new(),
        after: None,
        limit: 100,
        filter: Filter::default(),
    }
}

/// Many writers, each reading its own record back after every write, on
/// more tasks than the pool has connections: each read may get any
/// connection, one that served another task's read just before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_sees_the_writes_before_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let backend = Arc::new(SqliteBackend::open(&dir.path().join("floe.db"))?);
    let org = "readers";
    let mut tasks = Vec::new();
    for t in 0..32 {
        let backend = backend.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("task-{t:02}");
            backend
                .write(vec![Write::Create(record(org, &key, "0", 1))])
                .await?;
            for v in 1..=20u64 {
                let body = v.to_string();
                backend
                    .write(vec![Write::Update {
                        record: record(org, &key, &body, v + 1),
                        expected: v,
                    }])
                    .await?;
                let got = backend
                    .get(&RecordKey::new(org, Kind::Policy, &key))
                    .await?
                    .ok_or("a record written is missing")?;
                if got.body != body || got.version != v + 1 {
                    return Err(format!(
                        "{key}: read {} at version {} after writing {body} at version {}",
                        got.body,
                        got.version,
                        v + 1
                    )
                    .into());
                }
                let page = backend.list(&page_of(org)).await?;
                let listed = page
                    .records
                    .iter()
                    .find(|r| r.key.key == key)
                    .ok_or("a record written is not listed")?;
                if listed.body != body {
                    return Err(
                        format!("{key}: listed {} after writing {body}", listed.body).into(),
                    );
                }
            }
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let page = backend.list(&page_of(org)).await?;
    assert_eq!(page.records.len(), 32);
    assert!(page.records.iter().all(|r| r.body == "20"));
    Ok(())
}

/// A transaction still open in another connection (another process, say)
/// is invisible to reads, which do not wait for it; once it commits, the
/// next read sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_see_only_committed_writes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("floe.db");
    let backend = SqliteBackend::open(&path)?;
    let org = "committed";
    let key = RecordKey::new(org, Kind::Policy, "p");
    backend
        .write(vec![Write::Create(record(org, "p", "before", 1))])
        .await?;
    backend.get(&key).await?;

    let mut other = rusqlite::Connection::open(&path)?;
    let tx = other.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute(
        "UPDATE records SET body = 'after', version = 2 WHERE org = ?1 AND kind = ?2 AND key = ?3",
        rusqlite::params![org, Kind::Policy.prefix(), "p"],
    )?;
    let during = backend.get(&key).await?.ok_or("the record is missing")?;
    assert_eq!((during.body.as_str(), during.version), ("before", 1));
    let listed = backend.list(&page_of(org)).await?;
    assert_eq!(listed.records.len(), 1);
    assert_eq!(listed.records[0].body, "before");

    tx.commit()?;
    for _ in 0..8 {
        let after = backend.get(&key).await?.ok_or("the record is missing")?;
        assert_eq!((after.body.as_str(), after.version), ("after", 2));
    }
    let listed = backend.list(&page_of(org)).await?;
    assert_eq!(listed.records[0].body, "after");
    Ok(())
}

/// The in-memory database has one connection for everything: its reads
/// see its writes too.
#[tokio::test]
async fn in_memory_reads_see_writes() -> TestResult {
    let backend = SqliteBackend::in_memory()?;
    let key = RecordKey::new("mem", Kind::Policy, "p");
    backend
        .write(vec![Write::Create(record("mem", "p", "one", 1))])
        .await?;
    backend
        .write(vec![Write::Update {
            record: record("mem", "p", "two", 2),
            expected: 1,
        }])
        .await?;
    let got = backend.get(&key).await?.ok_or("the record is missing")?;
    assert_eq!(got.body, "two");
    assert_eq!(backend.list(&page_of("mem")).await?.records.len(), 1);
    Ok(())
}

/// The quiet mark moves with every write, failed ones too, and is shared
/// by backends of this process that opened the same file under other
/// names: a reader that keeps what it read through one must see the
/// other's writes. Another file's writes leave it alone.
#[tokio::test]
async fn the_quiet_mark_moves_with_every_write_to_the_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("sub"))?;
    let first = SqliteBackend::open(&dir.path().join("floe.db"))?;
    let second = SqliteBackend::open(&dir.path().join("sub/../floe.db"))?;
    let elsewhere = SqliteBackend::open(&dir.path().join("other.db"))?;
    let org = "marks";
    let before = first.quiet_mark().ok_or("no write is under way")?;
    assert_eq!(second.quiet_mark(), Some(before));
    elsewhere
        .write(vec![Write::Create(record(org, "p", "0", 1))])
        .await?;
    assert_eq!(first.quiet_mark(), Some(before), "another file was written");

    second
        .write(vec![Write::Create(record(org, "p", "0", 1))])
        .await?;
    let created = first.quiet_mark().ok_or("no write is under way")?;
    assert_ne!(created, before, "a write through the other backend");
    assert_eq!(second.quiet_mark(), Some(created));

    // Refused (the record exists): nothing changed, but a write began.
    let refused = first
        .write(vec![Write::Create(record(org, "p", "1", 1))])
        .await;
    assert!(refused.is_err());
    let after = first.quiet_mark().ok_or("no write is under way")?;
    assert_ne!(after, created);

    let memory = SqliteBackend::in_memory()?;
    let quiet = memory.quiet_mark().ok_or("no write is under way")?;
    memory
        .write(vec![Write::Create(record(org, "p", "0", 1))])
        .await?;
    assert_ne!(memory.quiet_mark(), Some(quiet));
    Ok(())
}

/// The records (sealed credentials among them) are the owner's alone: a new
/// file is made 0600, and one left readable by an older run is tightened.
#[tokio::test]
async fn the_database_file_is_readable_by_its_owner_only() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir()?;
    let mode = |name: &str| -> Result<u32, std::io::Error> {
        Ok(std::fs::metadata(dir.path().join(name))?
            .permissions()
            .mode()
            & 0o777)
    };
    let path = dir.path().join("floe.db");
    drop(SqliteBackend::open(&path)?);
    assert_eq!(mode("floe.db")?, 0o600);

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
    let backend = SqliteBackend::open(&path)?;
    assert_eq!(mode("floe.db")?, 0o600);
    backend
        .write(vec![Write::Create(record("o", "a", "{}", 1))])
        .await?;
    for name in ["floe.db", "floe.db-wal", "floe.db-shm"] {
        if dir.path().join(name).exists() {
            assert_eq!(mode(name)?, 0o600, "{name}");
        }
    }
    Ok(())
}
