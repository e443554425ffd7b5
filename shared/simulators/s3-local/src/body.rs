//! A request body as it streams in: decoded from `aws-chunked` when it is,
//! and checked against everything the request says about it — the signed
//! SHA-256, `Content-MD5`, the flexible checksum (header or trailer) and
//! `x-amz-decoded-content-length`. The MD5 (the future ETag) is computed on
//! the way.

use crate::checksum::{ChecksumAlgorithm, Hasher};
use crate::chunked::{ChunkDecoder, ChunkError};
use crate::error::{ErrorCode, S3Error};
use crate::sigv4::{Authenticated, Payload};
use crate::store::StoredChecksum;
use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use http::HeaderMap;
use http_body_util::BodyExt;
use md5::{Digest, Md5};
use sha2::Sha256;

/// Where the expected checksum value comes from.
enum Expected {
    Header(String),
    Trailer,
    /// Only named (`x-amz-sdk-checksum-algorithm`): computed and stored.
    None,
}

struct ChecksumCheck {
    algorithm: ChecksumAlgorithm,
    hasher: Hasher,
    expected: Expected,
}

/// What the body turned out to be.
pub(crate) struct BodySummary {
    pub(crate) md5_hex: String,
    pub(crate) checksum: Option<StoredChecksum>,
}

pub(crate) struct BodyReader {
    body: Body,
    decoder: Option<ChunkDecoder>,
    payload_sha256: Option<(Sha256, [u8; 32])>,
    md5: Md5,
    content_md5: Option<Vec<u8>>,
    checksum: Option<ChecksumCheck>,
    decoded_length: Option<u64>,
    size: u64,
    limit: u64,
    trailers: Vec<(String, String)>,
    ended: bool,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

fn chunk_error(error: ChunkError) -> S3Error {
    match error {
        ChunkError::BadChunkSignature | ChunkError::BadTrailerSignature => S3Error::new(
            ErrorCode::SignatureDoesNotMatch,
            format!(
                "The request signature we calculated does not match the signature you provided ({error})."
            ),
        ),
        ChunkError::Truncated => S3Error::new(
            ErrorCode::IncompleteBody,
            "You did not provide the number of bytes specified by the Content-Length HTTP header",
        ),
        ChunkError::Malformed(_) => S3Error::new(ErrorCode::InvalidRequest, error.to_string()),
    }
}

impl BodyReader {
    /// `limit` is the largest decoded body accepted (`EntityTooLarge`).
    pub(crate) fn new(
        body: Body,
        headers: &HeaderMap,
        auth: Authenticated,
        limit: u64,
    ) -> Result<BodyReader, S3Error> {
        let (decoder, payload_sha256) = match auth.payload {
            Payload::Unsigned => (None, None),
            Payload::Sha256(expected) => (None, Some((Sha256::new(), expected))),
            Payload::StreamingSigned { trailer } => {
                (Some(ChunkDecoder::signed(auth.chunk_signer, trailer)), None)
            }
            Payload::StreamingUnsignedTrailer => (Some(ChunkDecoder::unsigned()), None),
        };
        let decoded_length = match header(headers, "x-amz-decoded-content-length") {
            Some(text) => Some(text.parse::<u64>().map_err(|_| {
                S3Error::new(
                    ErrorCode::InvalidArgument,
                    "x-amz-decoded-content-length is not a number",
                )
            })?),
            None if decoder.is_some() => {
                return Err(S3Error::new(
                    ErrorCode::MissingContentLength,
                    "aws-chunked uploads must send x-amz-decoded-content-length",
                ));
            }
            None => None,
        };
        if decoded_length.is_some_and(|n| n > limit) {
            return Err(too_large());
        }
        let content_md5 = match header(headers, "content-md5") {
            Some(text) => Some(
                BASE64
                    .decode(text)
                    .ok()
                    .filter(|d| d.len() == 16)
                    .ok_or_else(|| {
                        S3Error::new(
                            ErrorCode::InvalidDigest,
                            "The Content-MD5 you specified was invalid.",
                        )
                    })?,
            ),
            None => None,
        };
        Ok(BodyReader {
            body,
            decoder,
            payload_sha256,
            md5: Md5::new(),
            content_md5,
            checksum: checksum_check(headers)?,
            decoded_length,
            size: 0,
            limit,
            trailers: Vec::new(),
            ended: false,
        })
    }

    /// The next piece of decoded data; `None` at the end.
    pub(crate) async fn next(&mut self) -> Result<Option<Bytes>, S3Error> {
        while !self.ended {
            let Some(frame) = self.body.frame().await else {
                self.ended = true;
                if let Some(decoder) = self.decoder.take() {
                    self.trailers = decoder.finish().map_err(chunk_error)?;
                }
                break;
            };
            let frame = frame.map_err(|error| {
                tracing::debug!(%error, "floe-s3-local: reading a request body failed");
                S3Error::new(
                    ErrorCode::IncompleteBody,
                    "The request body could not be read to its end",
                )
            })?;
            let Ok(data) = frame.into_data() else {
                // HTTP trailers: S3 checksums travel inside aws-chunked.
                continue;
            };
            let data = match &mut self.decoder {
                Some(decoder) => {
                    let mut out = Vec::with_capacity(data.len());
                    decoder.feed(&data, &mut out).map_err(chunk_error)?;
                    Bytes::from(out)
                }
                None => data,
            };
            if data.is_empty() {
                continue;
            }
            self.size += data.len() as u64;
            if self.size > self.limit {
                return Err(too_large());
            }
            self.md5.update(&data);
            if let Some((hasher, _)) = &mut self.payload_sha256 {
                hasher.update(&data);
            }
            if let Some(check) = &mut self.checksum {
                check.hasher.update(&data);
            }
            return Ok(Some(data));
        }
        Ok(None)
    }

    /// Reads what is left and checks the body against the request.
    pub(crate) async fn finish(mut self) -> Result<BodySummary, S3Error> {
        while self.next().await?.is_some() {}
        if let Some(expected) = self.decoded_length
            && expected != self.size
        {
            return Err(S3Error::new(
                ErrorCode::IncompleteBody,
                format!(
                    "The body holds {} bytes, x-amz-decoded-content-length says {expected}",
                    self.size
                ),
            ));
        }
        if let Some((hasher, expected)) = self.payload_sha256 {
            let actual: [u8; 32] = hasher.finalize().into();
            if actual != expected {
                return Err(S3Error::new(
                    ErrorCode::XAmzContentSHA256Mismatch,
                    "The provided 'x-amz-content-sha256' header does not match what was computed.",
                ));
            }
        }
        let md5 = self.md5.finalize();
        if let Some(expected) = &self.content_md5
            && expected.as_slice() != md5.as_slice()
        {
            return Err(S3Error::new(
                ErrorCode::BadDigest,
                "The Content-MD5 you specified did not match what we received.",
            ));
        }
        let checksum = match self.checksum {
            None => None,
            Some(check) => {
                let actual = check.hasher.finish_base64();
                let expected = match check.expected {
                    Expected::Header(value) => Some(value),
                    Expected::Trailer => {
                        let name = check.algorithm.header_name();
                        let value = self
                            .trailers
                            .iter()
                            .find(|(n, _)| n == name)
                            .map(|(_, v)| v.clone())
                            .ok_or_else(|| {
                                S3Error::new(
                                    ErrorCode::InvalidRequest,
                                    format!(
                                        "x-amz-trailer announced {name}, the body did not carry it"
                                    ),
                                )
                            })?;
                        Some(value)
                    }
                    Expected::None => None,
                };
                if let Some(expected) = expected
                    && expected != actual
                {
                    return Err(S3Error::new(
                        ErrorCode::BadDigest,
                        format!(
                            "The {} you specified did not match the calculated checksum.",
                            check.algorithm.header_name()
                        ),
                    ));
                }
                Some(StoredChecksum {
                    algorithm: check.algorithm,
                    value: actual,
                })
            }
        };
        Ok(BodySummary {
            md5_hex: hex::encode(md5),
            checksum,
        })
    }

    /// The whole body, for the small XML documents some requests carry.
    pub(crate) async fn collect(mut self) -> Result<Vec<u8>, S3Error> {
        let mut out = Vec::new();
        while let Some(data) = self.next().await? {
            out.extend_from_slice(&data);
        }
        self.finish().await?;
        Ok(out)
    }
}

fn too_large() -> S3Error {
    S3Error::new(
        ErrorCode::EntityTooLarge,
        "Your proposed upload exceeds the maximum allowed object size.",
    )
}

fn checksum_check(headers: &HeaderMap) -> Result<Option<ChecksumCheck>, S3Error> {
    let mut in_headers = crate::checksum::ALL
        .into_iter()
        .filter_map(|a| header(headers, a.header_name()).map(|v| (a, v.to_string())));
    let first = in_headers.next();
    if in_headers.next().is_some() {
        return Err(S3Error::new(
            ErrorCode::InvalidRequest,
            "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.",
        ));
    }
    let (algorithm, expected) = if let Some((algorithm, value)) = first {
        (algorithm, Expected::Header(value))
    } else if let Some(trailer) = header(headers, "x-amz-trailer") {
        let algorithm = ChecksumAlgorithm::from_header_name(trailer).ok_or_else(|| {
            S3Error::new(
                ErrorCode::InvalidRequest,
                format!(
                    "The value specified in the x-amz-trailer header is not supported: {trailer}"
                ),
            )
        })?;
        (algorithm, Expected::Trailer)
    } else if let Some(name) = header(headers, "x-amz-sdk-checksum-algorithm")
        .or(header(headers, "x-amz-checksum-algorithm"))
    {
        let algorithm = ChecksumAlgorithm::from_name(name).ok_or_else(|| {
            S3Error::new(
                ErrorCode::InvalidRequest,
                format!("Checksum algorithm {name} is not supported"),
            )
        })?;
        (algorithm, Expected::None)
    } else {
        return Ok(None);
    };
    Ok(Some(ChecksumCheck {
        algorithm,
        hasher: algorithm.hasher(),
        expected,
    }))
}
