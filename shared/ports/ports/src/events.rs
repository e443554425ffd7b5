//! The events port: what Floe tells operators on their event bus (the
//! account's default EventBridge bus on AWS), so that they route alerts
//! their usual way. An event says what happened to which deployment; it is
//! a notification, never the record (the API holds that).

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use std::sync::Mutex;

/// Every event's `source` on the bus.
pub const EVENT_SOURCE: &str = "floe";

/// One event. On EventBridge: `source` [`EVENT_SOURCE`], `detail-type`
/// [`PlatformEvent::detail_type`], and `detail` the JSON of `detail` with
/// `org` and `deployment_id` in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlatformEvent {
    /// What happened, as EventBridge rules match it (`Floe Drill Failed`).
    #[serde(skip)]
    pub detail_type: &'static str,
    /// The event's own fields: always `org` and `deployment_id`.
    pub detail: Value,
}

impl PlatformEvent {
    /// A restore drill failed (`detail`: the drill, its failure).
    pub const DRILL_FAILED: &'static str = "Floe Drill Failed";
    /// A deployment's recovery point or recovery time target was breached
    /// (`detail`: the target, what was found, why).
    pub const RECOVERY_TARGET_BREACHED: &'static str = "Floe Recovery Target Breached";
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the event was not published: {0}")]
pub struct EventError(pub String);

#[async_trait]
pub trait Events: Send + Sync {
    /// Publishes `event` once. `Err` when the bus refused it or could not
    /// be reached; the caller logs it (an event is never worth failing the
    /// work that raised it).
    async fn publish(&self, event: &PlatformEvent) -> Result<(), EventError>;
}

/// Where no bus is configured (local mode): each event is logged, as a
/// warning, with its detail.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoggedEvents;

#[async_trait]
impl Events for LoggedEvents {
    async fn publish(&self, event: &PlatformEvent) -> Result<(), EventError> {
        tracing::warn!(detail_type = event.detail_type, detail = %event.detail, "event");
        Ok(())
    }
}

/// Keeps what is published, in order: for tests of what raises events.
#[derive(Debug, Default)]
pub struct RecordedEvents(Mutex<Vec<PlatformEvent>>);

impl RecordedEvents {
    pub fn taken(&self) -> Vec<PlatformEvent> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[async_trait]
impl Events for RecordedEvents {
    async fn publish(&self, event: &PlatformEvent) -> Result<(), EventError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event.clone());
        Ok(())
    }
}
