//! Views made once: a read of an unchanged deployment answers the JSON made
//! the first time it was shown, rather than decoding its record and
//! encoding its view again (a page of 100 did both a hundred times, most of
//! its time). The store's [`Memo`] decides when a kept view still answers:
//! only for the record, byte for byte, it was made from.

use crate::AppError;
use floe_domain::deployment::DeploymentView;
use floe_store::{Memo, Weigh};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use std::marker::PhantomData;
use std::sync::Arc;

/// A `T` as JSON, with the version of the record it shows. Serialises as
/// the JSON of the `T`; cheap to clone.
pub struct Shown<T> {
    json: Arc<RawValue>,
    version: u64,
    of: PhantomData<fn() -> T>,
}

impl<T> Clone for Shown<T> {
    fn clone(&self) -> Self {
        Shown {
            json: self.json.clone(),
            version: self.version,
            of: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Shown<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shown")
            .field("version", &self.version)
            .field("json", &self.json.get())
            .finish()
    }
}

impl<T: Serialize> Shown<T> {
    pub fn new(value: &T, version: u64) -> Result<Shown<T>, AppError> {
        let json = serde_json::value::to_raw_value(value).map_err(|e| {
            tracing::error!(error = %e, "cannot encode a view");
            AppError::Internal
        })?;
        Ok(Shown {
            json: Arc::from(json),
            version,
            of: PhantomData,
        })
    }
}

impl<T> Shown<T> {
    /// The version of the record shown (the `resource_version`, the ETag).
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn json(&self) -> &str {
        self.json.get()
    }
}

impl<T> Serialize for Shown<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}

impl<T> Weigh for Shown<T> {
    fn weight(&self) -> usize {
        self.json.get().len()
    }
}

/// What the views of deployments may keep: some 4,000 deployments as a
/// fresh one is stored and shown (a body and a view of about 600 bytes
/// each), fewer once they run (their access adds a CA certificate). Within
/// the api function's memory on Lambda, where it fills only as far as one
/// instance's reads reach.
pub const DEPLOYMENT_VIEWS_BUDGET: usize = 4 << 20;

/// The deployments' views, kept while their records are unchanged.
pub struct DeploymentViews(pub(crate) Memo<Shown<DeploymentView>>);

impl Default for DeploymentViews {
    fn default() -> Self {
        DeploymentViews(Memo::new(DEPLOYMENT_VIEWS_BUDGET))
    }
}

impl DeploymentViews {
    /// Views kept and the bytes counted for them.
    pub fn usage(&self) -> (usize, usize) {
        self.0.usage()
    }
}
