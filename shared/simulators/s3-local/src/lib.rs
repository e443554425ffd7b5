//! An S3-compatible object store on loopback, for Floe's local mode: the
//! simulated Elasticsearch clusters (and the AWS CLI, and any AWS SDK)
//! snapshot into it and restore from it with the real S3 protocol, with no
//! extra install.
//!
//! ```no_run
//! # async fn run() -> Result<(), floe_s3_local::S3LocalError> {
//! use floe_s3_local::{Credentials, LocalS3, LocalS3Config};
//! let config = LocalS3Config::new(".floe/s3", Credentials::new("floe-local", "floe-local-secret"))
//!     .with_bucket("floe-snapshots");
//! let s3 = LocalS3::start(config).await?;
//! println!("S3 at {}", s3.endpoint_url());
//! s3.shutdown().await
//! # }
//! ```
//!
//! What it implements: path-style and virtual-host-style addressing
//! (`bucket.localhost`); CreateBucket, HeadBucket, DeleteBucket,
//! ListBuckets, GetBucketLocation, GetBucketVersioning; PutObject (also
//! `If-None-Match: *`), GetObject (with `Range`, `If-Match`,
//! `If-None-Match`), HeadObject, DeleteObject, DeleteObjects, CopyObject,
//! ListObjects and ListObjectsV2; multipart uploads (create, upload part,
//! complete, abort). Every request must carry a valid SigV4 signature (header
//! or presigned URL) by the configured key; bodies may be plain, signed,
//! unsigned or `aws-chunked` (signed chunks or unsigned with a checksum
//! trailer), and every checksum a request carries is verified.
//!
//! What it does not: versioning, ACLs and policies, tagging, ListParts,
//! ListMultipartUploads, UploadPartCopy, SSE, composite checksums of
//! multipart objects, and keys that are both an object and a "folder"
//! (`a` and `a/b`) or end in `/`.

mod body;
mod checksum;
mod chunked;
mod config;
mod error;
mod handlers;
mod server;
mod sigv4;
mod store;
mod xml;

pub use config::{Credentials, DEFAULT_REGION, LocalS3Config};
pub use error::S3LocalError;
pub use server::{LocalS3, RunningS3};
