//! The in-process scheduler: the port's semantics, and firings driven by a
//! manual clock, each due instant exactly once and in order.

use chrono::{DateTime, Utc};
use floe_schedules::{
    Fire, Firing, LocalScheduler, ManualClock, ScheduleSpec, ScheduledJob, Scheduler,
    SchedulerError, SnapshotJob,
};
use futures_util::future::BoxFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn utc(s: &str) -> Result<DateTime<Utc>, chrono::ParseError> {
    Ok(DateTime::parse_from_rfc3339(s)?.with_timezone(&Utc))
}

fn spec(name: &str, expression: &str, timezone: &str) -> ScheduleSpec {
    ScheduleSpec {
        name: name.into(),
        expression: expression.into(),
        timezone: timezone.into(),
        input: SnapshotJob {
            org: "acme".into(),
            deployment_id: format!("dep-{name}"),
            policy_id: "pol".into(),
        }
        .into(),
    }
}

fn setup(start: &str) -> Result<(Arc<ManualClock>, LocalScheduler), chrono::ParseError> {
    let clock = Arc::new(ManualClock::new(utc(start)?));
    let scheduler = LocalScheduler::new(clock.clone());
    Ok((clock, scheduler))
}

fn instants(firings: &[Firing]) -> Vec<String> {
    firings
        .iter()
        .map(|f| format!("{} {}", f.at.format("%Y-%m-%dT%H:%M"), f.name))
        .collect()
}

#[tokio::test]
async fn a_rate_fires_at_creation_then_every_period_exactly_once() -> TestResult {
    let (clock, scheduler) = setup("2026-03-01T10:00:00Z")?;
    scheduler.put(&spec("s", "rate(30 minutes)", "UTC")).await?;
    // As on AWS, a rate schedule without a start date fires right away.
    assert_eq!(
        instants(&scheduler.due_firings(clock.now_utc())),
        ["2026-03-01T10:00 s"]
    );
    clock.advance(Duration::from_secs(2 * 3600));
    let due = scheduler.due_firings(clock.now_utc());
    assert_eq!(
        instants(&due),
        [
            "2026-03-01T10:30 s",
            "2026-03-01T11:00 s",
            "2026-03-01T11:30 s",
            "2026-03-01T12:00 s",
        ]
    );
    assert!(due.iter().all(|f| f.job.deployment_id() == "dep-s"));
    // Nothing is handed out twice.
    assert!(scheduler.due_firings(clock.now_utc()).is_empty());
    clock.advance(Duration::from_secs(29 * 60));
    assert!(scheduler.due_firings(clock.now_utc()).is_empty());
    clock.advance(Duration::from_secs(60));
    assert_eq!(
        instants(&scheduler.due_firings(clock.now_utc())),
        ["2026-03-01T12:30 s"]
    );
    Ok(())
}

#[tokio::test]
async fn firings_of_several_schedules_come_in_time_order() -> TestResult {
    let (clock, scheduler) = setup("2026-03-28T22:00:00Z")?;
    scheduler
        .put(&spec("a-hourly", "rate(1 hour)", "UTC"))
        .await?;
    // 02:30 Berlin does not exist on 29 March 2026; 03:30 does (01:30 UTC).
    scheduler
        .put(&spec("b-berlin", "cron(30 2,3 * * ? *)", "Europe/Berlin"))
        .await?;
    clock.advance(Duration::from_secs(4 * 3600));
    assert_eq!(
        instants(&scheduler.due_firings(clock.now_utc())),
        [
            "2026-03-28T22:00 a-hourly",
            "2026-03-28T23:00 a-hourly",
            "2026-03-29T00:00 a-hourly",
            "2026-03-29T01:00 a-hourly",
            "2026-03-29T01:30 b-berlin",
            "2026-03-29T02:00 a-hourly",
        ]
    );
    Ok(())
}

#[tokio::test]
async fn updates_keep_or_restart_the_timing_and_deletes_stop_it() -> TestResult {
    let (clock, scheduler) = setup("2026-03-01T10:00:00Z")?;
    scheduler.put(&spec("s", "rate(30 minutes)", "UTC")).await?;
    scheduler.due_firings(clock.now_utc());
    clock.advance(Duration::from_secs(10 * 60));

    // A new input with the same timing keeps the count.
    let mut moved = spec("s", "rate(30 minutes)", "UTC");
    moved.input = SnapshotJob {
        org: "acme".into(),
        deployment_id: "dep-s".into(),
        policy_id: "other".into(),
    }
    .into();
    scheduler.put(&moved).await?;
    assert_eq!(
        scheduler.next_firing("s"),
        Some(utc("2026-03-01T10:30:00Z")?)
    );

    // A new expression starts over from now, as a new schedule would.
    scheduler.put(&spec("s", "rate(1 hour)", "UTC")).await?;
    assert_eq!(
        scheduler.next_firing("s"),
        Some(utc("2026-03-01T10:10:00Z")?)
    );
    scheduler
        .put(&spec("s", "cron(0 12 * * ? *)", "UTC"))
        .await?;
    assert_eq!(
        scheduler.next_firing("s"),
        Some(utc("2026-03-01T12:00:00Z")?)
    );
    // A new time zone moves the firing.
    scheduler
        .put(&spec("s", "cron(0 12 * * ? *)", "Asia/Tokyo"))
        .await?;
    assert_eq!(
        scheduler.next_firing("s"),
        Some(utc("2026-03-02T03:00:00Z")?)
    );

    scheduler.delete("s").await?;
    scheduler.delete("s").await?;
    clock.advance(Duration::from_secs(86_400));
    assert!(scheduler.due_firings(clock.now_utc()).is_empty());
    assert!(scheduler.schedules().is_empty());
    Ok(())
}

#[tokio::test]
async fn lists_by_prefix_only() -> TestResult {
    let (_clock, scheduler) = setup("2026-03-01T10:00:00Z")?;
    for name in ["floe-aa-1", "floe-aa-2", "floe-ab-1", "floe-a", "other"] {
        scheduler.put(&spec(name, "rate(1 day)", "UTC")).await?;
    }
    let mut names: Vec<String> = scheduler
        .list("floe-aa-")
        .await?
        .into_iter()
        .map(|s| s.name)
        .collect();
    names.sort();
    assert_eq!(names, ["floe-aa-1", "floe-aa-2"]);
    assert_eq!(scheduler.list("").await?.len(), 5);
    assert!(scheduler.list("nothing").await?.is_empty());
    let listed = scheduler.list("other").await?;
    assert_eq!(
        listed.first().and_then(|s| s.spec.clone()),
        Some(spec("other", "rate(1 day)", "UTC"))
    );
    Ok(())
}

#[tokio::test]
async fn refuses_what_eventbridge_would() -> TestResult {
    let (_clock, scheduler) = setup("2026-03-01T10:00:00Z")?;
    for bad in [
        spec("s", "cron(0 0 * * * *)", "UTC"),
        spec("s", "rate(5 weeks)", "UTC"),
        spec("s", "rate(5 minutes)", "Nowhere/Special"),
        spec("bad/name", "rate(5 minutes)", "UTC"),
        spec(&"x".repeat(65), "rate(5 minutes)", "UTC"),
    ] {
        let result = scheduler.put(&bad).await;
        assert!(
            matches!(result, Err(SchedulerError::Rejected { .. })),
            "{bad:?}: {result:?}"
        );
    }
    assert!(scheduler.schedules().is_empty());
    Ok(())
}

#[tokio::test]
async fn tick_hands_due_jobs_to_the_callback_in_order() -> TestResult {
    let (clock, scheduler) = setup("2026-03-01T10:00:00Z")?;
    scheduler.put(&spec("s", "rate(15 minutes)", "UTC")).await?;
    let seen: Arc<Mutex<Vec<ScheduledJob>>> = Arc::default();
    let sink = seen.clone();
    let fire = move |job: ScheduledJob| -> BoxFuture<'static, ()> {
        let sink = sink.clone();
        Box::pin(async move {
            sink.lock().map(|mut v| v.push(job)).unwrap_or_default();
        })
    };
    assert_eq!(scheduler.tick(&fire).await, 1);
    clock.advance(Duration::from_secs(3600));
    assert_eq!(scheduler.tick(&fire).await, 4);
    assert_eq!(scheduler.tick(&fire).await, 0);
    assert_eq!(seen.lock().map(|v| v.len()).unwrap_or_default(), 5);
    Ok(())
}

struct Counter(Mutex<Vec<ScheduledJob>>);

#[async_trait::async_trait]
impl Fire for Counter {
    async fn fire(&self, job: ScheduledJob) {
        if let Ok(mut v) = self.0.lock() {
            v.push(job);
        }
    }
}

impl Counter {
    fn count(&self) -> usize {
        self.0.lock().map(|v| v.len()).unwrap_or_default()
    }
}

#[tokio::test]
async fn the_spawned_loop_fires_when_the_clock_moves() -> TestResult {
    let (clock, scheduler) = setup("2026-03-01T10:00:00Z")?;
    let scheduler = Arc::new(scheduler);
    let counter = Arc::new(Counter(Mutex::new(Vec::new())));
    let handle = scheduler
        .clone()
        .spawn(counter.clone(), Duration::from_millis(10));
    scheduler.put(&spec("s", "rate(30 minutes)", "UTC")).await?;
    wait_for(|| counter.count() == 1).await?;
    clock.advance(Duration::from_secs(3600));
    wait_for(|| counter.count() == 3).await?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(counter.count(), 3, "fired more than once per due time");
    handle.abort();
    Ok(())
}

async fn wait_for(condition: impl Fn() -> bool) -> TestResult {
    for _ in 0..500 {
        if condition() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err("timed out".into())
}

trait NowUtc {
    fn now_utc(&self) -> DateTime<Utc>;
}

impl NowUtc for ManualClock {
    fn now_utc(&self) -> DateTime<Utc> {
        floe_schedules::Clock::now(self)
    }
}
