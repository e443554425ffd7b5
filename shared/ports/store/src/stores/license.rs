//! An organization's platform license: one record per organization,
//! replaced whole by each upload, on the version its writer read.

use super::batch::{Batch, Meaning};
use super::{Store, StoreError, Versioned, encode, record};
use crate::backend::{Attrs, Kind, RecordKey, Write};
use floe_domain::license::PlatformLicense;

/// The key of the one license record of an organization.
const KEY: &str = "platform";

impl Store {
    pub async fn get_platform_license(
        &self,
        org: &str,
    ) -> Result<Option<Versioned<PlatformLicense>>, StoreError> {
        self.get(RecordKey::new(org, Kind::PlatformLicense, KEY))
            .await
    }

    /// Stores `license` as the organization's: created when `previous` is
    /// `None` (`AlreadyExists` if another upload got there first), else in
    /// place of `previous` (`VersionMismatch` if it changed since).
    /// Returns the new version.
    pub async fn put_platform_license(
        &self,
        license: &PlatformLicense,
        previous: Option<&Versioned<PlatformLicense>>,
    ) -> Result<u64, StoreError> {
        let version = previous.map_or(1, |p| p.version + 1);
        let stored = record(
            RecordKey::new(&license.org, Kind::PlatformLicense, KEY),
            encode(license)?,
            version,
            Attrs::default(),
        );
        let write = match previous {
            None => Write::Create(stored),
            Some(p) => Write::Update {
                record: stored,
                expected: p.version,
            },
        };
        let mut b = Batch::default();
        b.push(write, Meaning::Own);
        b.run(self.backend.as_ref()).await?;
        Ok(version)
    }

    /// Deletes the organization's license as `previous` read it.
    pub async fn delete_platform_license(
        &self,
        previous: &Versioned<PlatformLicense>,
    ) -> Result<(), StoreError> {
        let mut b = Batch::default();
        b.push(
            Write::Delete {
                key: RecordKey::new(&previous.value.org, Kind::PlatformLicense, KEY),
                expected: previous.version,
                unreferenced: false,
            },
            Meaning::Own,
        );
        b.run(self.backend.as_ref()).await
    }
}
