//! The EventBridge adapter of the events port: each event is one entry of
//! `PutEvents` on the configured bus (the account's `default` bus, where
//! operators' rules already route AWS's own events), with source `floe`,
//! the event's detail type, and its detail as JSON.
//!
//! This is the only crate that links `aws-sdk-eventbridge`.

use async_trait::async_trait;
use aws_sdk_eventbridge::Client;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use floe_aws_errors::describe;
use floe_ports::{EVENT_SOURCE, EventError, Events, PlatformEvent};

/// Every IAM action this crate needs, and no other: the worker's policy
/// in the deploy template is checked against it.
pub const OPERATIONS: &[&str] = &["events:PutEvents"];

/// The bus events go to unless configured otherwise.
pub const DEFAULT_BUS: &str = "default";

/// The events port on one EventBridge bus.
#[derive(Clone)]
pub struct EventBridgeEvents {
    client: Client,
    bus: String,
}

// The client's configuration is left out: it holds the credentials provider.
impl std::fmt::Debug for EventBridgeEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBridgeEvents")
            .field("bus", &self.bus)
            .finish_non_exhaustive()
    }
}

impl EventBridgeEvents {
    /// The bus named `bus` (a name or an ARN), through a client built from
    /// the process's shared SDK configuration.
    pub fn new(sdk: &aws_config::SdkConfig, bus: impl Into<String>) -> EventBridgeEvents {
        EventBridgeEvents {
            client: Client::new(sdk),
            bus: bus.into(),
        }
    }

    pub fn bus(&self) -> &str {
        &self.bus
    }
}

#[async_trait]
impl Events for EventBridgeEvents {
    async fn publish(&self, event: &PlatformEvent) -> Result<(), EventError> {
        let entry = PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus)
            .source(EVENT_SOURCE)
            .detail_type(event.detail_type)
            .detail(event.detail.to_string())
            .build();
        let out = self
            .client
            .put_events()
            .entries(entry)
            .send()
            .await
            .map_err(|e| EventError(format!("PutEvents: {}", describe(&e))))?;
        // PutEvents answers 200 with the entries it refused counted and
        // each refusal's reason: a refused entry is an error like any other.
        if out.failed_entry_count() > 0 {
            let why = out
                .entries()
                .iter()
                .find_map(|e| {
                    e.error_code()
                        .map(|c| format!("{c}: {}", e.error_message().unwrap_or("")))
                })
                .unwrap_or_else(|| "no reason given".into());
            return Err(EventError(format!("PutEvents refused the event: {why}")));
        }
        tracing::info!(bus = %self.bus, detail_type = event.detail_type, "event published");
        Ok(())
    }
}
