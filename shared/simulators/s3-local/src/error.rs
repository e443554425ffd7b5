//! The two kinds of failure: starting the server ([`S3LocalError`], for the
//! caller of [`crate::LocalS3::start`]) and answering a request ([`S3Error`],
//! sent to the client as S3's XML error document).

use http::StatusCode;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Why [`crate::LocalS3::start`] or [`crate::RunningS3::shutdown`] failed.
#[derive(Debug, thiserror::Error)]
pub enum S3LocalError {
    /// The store holds whatever anyone who can reach it writes; it must not
    /// be reachable from another machine.
    #[error("floe-s3-local listens on loopback only; {0} is not a loopback address")]
    NotLoopback(SocketAddr),
    #[error("invalid bucket name {name:?}: {reason}")]
    InvalidBucketName { name: String, reason: &'static str },
    #[error("the access key id and the secret access key must not be empty")]
    EmptyCredentials,
    #[error("preparing the storage folder {path}: {source}")]
    Storage {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("listening on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the S3 server stopped with an error: {0}")]
    Server(#[source] std::io::Error),
    #[error("the S3 server task panicked or was cancelled")]
    ServerTask,
}

/// The S3 error codes this server answers with; each has S3's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorCode {
    AccessDenied,
    AuthorizationHeaderMalformed,
    AuthorizationQueryParametersError,
    BadDigest,
    BucketAlreadyOwnedByYou,
    BucketNotEmpty,
    EntityTooLarge,
    EntityTooSmall,
    IncompleteBody,
    InternalError,
    InvalidAccessKeyId,
    InvalidArgument,
    InvalidBucketName,
    InvalidDigest,
    InvalidPart,
    InvalidPartOrder,
    InvalidRange,
    InvalidRequest,
    KeyTooLongError,
    MalformedXML,
    MethodNotAllowed,
    MissingContentLength,
    NoSuchBucket,
    NoSuchKey,
    NoSuchUpload,
    NotImplemented,
    PreconditionFailed,
    RequestTimeTooSkewed,
    SignatureDoesNotMatch,
    XAmzContentSHA256Mismatch,
}

impl ErrorCode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorCode::AccessDenied => "AccessDenied",
            ErrorCode::AuthorizationHeaderMalformed => "AuthorizationHeaderMalformed",
            ErrorCode::AuthorizationQueryParametersError => "AuthorizationQueryParametersError",
            ErrorCode::BadDigest => "BadDigest",
            ErrorCode::BucketAlreadyOwnedByYou => "BucketAlreadyOwnedByYou",
            ErrorCode::BucketNotEmpty => "BucketNotEmpty",
            ErrorCode::EntityTooLarge => "EntityTooLarge",
            ErrorCode::EntityTooSmall => "EntityTooSmall",
            ErrorCode::IncompleteBody => "IncompleteBody",
            ErrorCode::InternalError => "InternalError",
            ErrorCode::InvalidAccessKeyId => "InvalidAccessKeyId",
            ErrorCode::InvalidArgument => "InvalidArgument",
            ErrorCode::InvalidBucketName => "InvalidBucketName",
            ErrorCode::InvalidDigest => "InvalidDigest",
            ErrorCode::InvalidPart => "InvalidPart",
            ErrorCode::InvalidPartOrder => "InvalidPartOrder",
            ErrorCode::InvalidRange => "InvalidRange",
            ErrorCode::InvalidRequest => "InvalidRequest",
            ErrorCode::KeyTooLongError => "KeyTooLongError",
            ErrorCode::MalformedXML => "MalformedXML",
            ErrorCode::MethodNotAllowed => "MethodNotAllowed",
            ErrorCode::MissingContentLength => "MissingContentLength",
            ErrorCode::NoSuchBucket => "NoSuchBucket",
            ErrorCode::NoSuchKey => "NoSuchKey",
            ErrorCode::NoSuchUpload => "NoSuchUpload",
            ErrorCode::NotImplemented => "NotImplemented",
            ErrorCode::PreconditionFailed => "PreconditionFailed",
            ErrorCode::RequestTimeTooSkewed => "RequestTimeTooSkewed",
            ErrorCode::SignatureDoesNotMatch => "SignatureDoesNotMatch",
            ErrorCode::XAmzContentSHA256Mismatch => "XAmzContentSHA256Mismatch",
        }
    }

    pub(crate) fn status(self) -> StatusCode {
        match self {
            ErrorCode::AccessDenied
            | ErrorCode::InvalidAccessKeyId
            | ErrorCode::RequestTimeTooSkewed
            | ErrorCode::SignatureDoesNotMatch => StatusCode::FORBIDDEN,
            ErrorCode::NoSuchBucket | ErrorCode::NoSuchKey | ErrorCode::NoSuchUpload => {
                StatusCode::NOT_FOUND
            }
            ErrorCode::BucketAlreadyOwnedByYou | ErrorCode::BucketNotEmpty => StatusCode::CONFLICT,
            ErrorCode::InternalError => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::NotImplemented => StatusCode::NOT_IMPLEMENTED,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::MissingContentLength => StatusCode::LENGTH_REQUIRED,
            ErrorCode::InvalidRange => StatusCode::RANGE_NOT_SATISFIABLE,
            ErrorCode::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            ErrorCode::AuthorizationHeaderMalformed
            | ErrorCode::AuthorizationQueryParametersError
            | ErrorCode::BadDigest
            | ErrorCode::EntityTooLarge
            | ErrorCode::EntityTooSmall
            | ErrorCode::IncompleteBody
            | ErrorCode::InvalidArgument
            | ErrorCode::InvalidBucketName
            | ErrorCode::InvalidDigest
            | ErrorCode::InvalidPart
            | ErrorCode::InvalidPartOrder
            | ErrorCode::InvalidRequest
            | ErrorCode::KeyTooLongError
            | ErrorCode::MalformedXML
            | ErrorCode::XAmzContentSHA256Mismatch => StatusCode::BAD_REQUEST,
        }
    }
}

/// A failed request, rendered as S3 renders it.
#[derive(Debug, Clone)]
pub(crate) struct S3Error {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
    /// `/bucket/key`: S3 names the resource in its error documents, and
    /// clients print it.
    pub(crate) resource: Option<String>,
}

impl S3Error {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> S3Error {
        S3Error {
            code,
            message: message.into(),
            resource: None,
        }
    }

    pub(crate) fn with_resource(mut self, resource: impl Into<String>) -> S3Error {
        self.resource = Some(resource.into());
        self
    }

    /// A failure of this machine rather than of the request: logged here,
    /// since the client only sees a generic message.
    pub(crate) fn internal(context: &str, error: impl std::fmt::Display) -> S3Error {
        tracing::error!(%error, "floe-s3-local: {context}");
        S3Error::new(
            ErrorCode::InternalError,
            "We encountered an internal error. Please try again.",
        )
    }

    pub(crate) fn no_such_bucket(bucket: &str) -> S3Error {
        S3Error::new(
            ErrorCode::NoSuchBucket,
            "The specified bucket does not exist",
        )
        .with_resource(format!("/{bucket}"))
    }

    pub(crate) fn no_such_key(bucket: &str, key: &str) -> S3Error {
        S3Error::new(ErrorCode::NoSuchKey, "The specified key does not exist.")
            .with_resource(format!("/{bucket}/{key}"))
    }

    pub(crate) fn no_such_upload(upload_id: &str) -> S3Error {
        S3Error::new(
            ErrorCode::NoSuchUpload,
            "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.",
        )
        .with_resource(upload_id.to_string())
    }

    pub(crate) fn to_xml(&self, request_id: &str) -> String {
        let mut xml = String::from(r#"<?xml version="1.0" encoding="UTF-8"?>"#);
        xml.push_str("<Error>");
        crate::xml::element(&mut xml, "Code", self.code.as_str());
        crate::xml::element(&mut xml, "Message", &self.message);
        if let Some(resource) = &self.resource {
            crate::xml::element(&mut xml, "Resource", resource);
        }
        crate::xml::element(&mut xml, "RequestId", request_id);
        xml.push_str("</Error>");
        xml
    }
}

impl std::fmt::Display for S3Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for S3Error {}
