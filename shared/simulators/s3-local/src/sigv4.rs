//! AWS Signature Version 4 as S3 checks it: the `Authorization` header or a
//! presigned URL's query, then (for `aws-chunked` bodies) each chunk and the
//! trailer. Every comparison of client-supplied secrets runs in constant
//! time.

use crate::config::Credentials;
use crate::error::{ErrorCode, S3Error};
use chrono::{DateTime, NaiveDateTime, TimeDelta, Utc};
use hmac::{Hmac, KeyInit, Mac};
use http::HeaderMap;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

const ALGORITHM: &str = "AWS4-HMAC-SHA256";
/// S3's tolerance for clocks that disagree.
const MAX_SKEW: TimeDelta = TimeDelta::minutes(15);
/// The longest a presigned URL may live (seven days), as S3 enforces.
const MAX_PRESIGNED_EXPIRY_SECS: i64 = 604_800;
pub(crate) const EMPTY_SHA256: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// SigV4's URI encoding: everything but unreserved characters.
const SIGV4_QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');
const SIGV4_PATH: &AsciiSet = &SIGV4_QUERY.remove(b'/');

pub(crate) fn uri_encode(text: &str, keep_slash: bool) -> String {
    let set = if keep_slash { SIGV4_PATH } else { SIGV4_QUERY };
    utf8_percent_encode(text, set).to_string()
}

/// What the signature says about the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Payload {
    /// `UNSIGNED-PAYLOAD` (and presigned URLs).
    Unsigned,
    /// The hex SHA-256 the body must have.
    Sha256([u8; 32]),
    /// `aws-chunked` with signed chunks; `trailer` when a signed trailer
    /// follows the last chunk.
    StreamingSigned { trailer: bool },
    /// `aws-chunked`, unsigned chunks, an unsigned trailer (the SDKs'
    /// default for uploads with checksums).
    StreamingUnsignedTrailer,
}

/// A request whose signature checked out.
pub(crate) struct Authenticated {
    pub(crate) payload: Payload,
    /// For verifying `aws-chunked` chunk signatures, which chain from the
    /// request's signature.
    pub(crate) chunk_signer: ChunkSigner,
}

/// The state that chunk signatures chain through.
pub(crate) struct ChunkSigner {
    key: [u8; 32],
    amz_date: String,
    scope: String,
    previous: String,
}

impl ChunkSigner {
    /// Checks one chunk's signature (given the SHA-256 of its data) and
    /// advances the chain.
    pub(crate) fn verify_chunk(&mut self, data_sha256: &[u8], signature: &str) -> bool {
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256-PAYLOAD\n{}\n{}\n{}\n{EMPTY_SHA256}\n{}",
            self.amz_date,
            self.scope,
            self.previous,
            hex::encode(data_sha256)
        );
        self.advance(&string_to_sign, signature)
    }

    /// Checks the trailer signature over the canonical trailer lines
    /// (`name:value\n` each).
    pub(crate) fn verify_trailer(&mut self, canonical_trailers: &str, signature: &str) -> bool {
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256-TRAILER\n{}\n{}\n{}\n{}",
            self.amz_date,
            self.scope,
            self.previous,
            hex::encode(Sha256::digest(canonical_trailers.as_bytes()))
        );
        self.advance(&string_to_sign, signature)
    }

    fn advance(&mut self, string_to_sign: &str, signature: &str) -> bool {
        let expected = hex::encode(hmac(&self.key, string_to_sign.as_bytes()));
        let ok = constant_time_eq(&expected, signature);
        self.previous = expected;
        ok
    }
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length; the error case cannot happen.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .expect("HMAC-SHA256 accepts a key of any length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> [u8; 32] {
    let k_date = hmac(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac(&k_date, region.as_bytes());
    let k_service = hmac(&k_region, service.as_bytes());
    hmac(&k_service, b"aws4_request")
}

pub(crate) fn constant_time_eq(a: &str, b: &str) -> bool {
    // Lengths are public (hex signatures are always 64 characters); only
    // the contents are compared in constant time.
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// What a signature covers of the request line.
pub(crate) struct SignedRequest<'a> {
    pub(crate) method: &'a str,
    /// The path as sent, still percent-encoded.
    pub(crate) raw_path: &'a str,
    /// The path decoded.
    pub(crate) path: &'a str,
    /// Decoded query parameters in the order sent.
    pub(crate) query: &'a [(String, String)],
    pub(crate) headers: &'a HeaderMap,
}

fn query_value<'a>(query: &'a [(String, String)], name: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Checks the request's signature against `credentials`.
pub(crate) fn authenticate(
    request: &SignedRequest<'_>,
    credentials: &Credentials,
    now: DateTime<Utc>,
) -> Result<Authenticated, S3Error> {
    if let Some(authorization) = request.headers.get(http::header::AUTHORIZATION) {
        let authorization = authorization.to_str().map_err(|_| malformed_header())?;
        authenticate_header(request, authorization, credentials, now)
    } else if query_value(request.query, "X-Amz-Algorithm").is_some() {
        authenticate_query(request, credentials, now)
    } else {
        Err(S3Error::new(
            ErrorCode::AccessDenied,
            "Access Denied: anonymous requests are not accepted; sign with the configured access key",
        ))
    }
}

fn malformed_header() -> S3Error {
    S3Error::new(
        ErrorCode::AuthorizationHeaderMalformed,
        "The authorization header is malformed.",
    )
}

/// The `Credential=` part: `AKID/yyyymmdd/region/service/aws4_request`.
struct Scope<'a> {
    access_key_id: &'a str,
    date: &'a str,
    region: &'a str,
    service: &'a str,
}

impl<'a> Scope<'a> {
    fn parse(credential: &'a str, error: fn() -> S3Error) -> Result<Scope<'a>, S3Error> {
        let mut parts = credential.split('/');
        let (Some(access_key_id), Some(date), Some(region), Some(service), Some(terminal), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(error());
        };
        if terminal != "aws4_request" || date.len() != 8 || service != "s3" {
            return Err(error());
        }
        Ok(Scope {
            access_key_id,
            date,
            region,
            service,
        })
    }

    fn text(&self) -> String {
        format!(
            "{}/{}/{}/aws4_request",
            self.date, self.region, self.service
        )
    }
}

fn check_access_key(scope: &Scope<'_>, credentials: &Credentials) -> Result<(), S3Error> {
    if constant_time_eq(scope.access_key_id, &credentials.access_key_id) {
        Ok(())
    } else {
        Err(S3Error::new(
            ErrorCode::InvalidAccessKeyId,
            "The AWS Access Key Id you provided does not exist in our records.",
        ))
    }
}

fn parse_amz_date(text: &str) -> Option<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(text, "%Y%m%dT%H%M%SZ")
        .ok()
        .map(|naive| naive.and_utc())
}

fn signature_mismatch() -> S3Error {
    S3Error::new(
        ErrorCode::SignatureDoesNotMatch,
        "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
    )
}

fn authenticate_header(
    request: &SignedRequest<'_>,
    authorization: &str,
    credentials: &Credentials,
    now: DateTime<Utc>,
) -> Result<Authenticated, S3Error> {
    let Some(fields) = authorization.strip_prefix(ALGORITHM) else {
        return Err(S3Error::new(
            ErrorCode::InvalidArgument,
            "Only AWS4-HMAC-SHA256 (SigV4) authorization is supported",
        ));
    };
    let (mut credential, mut signed_headers, mut signature) = (None, None, None);
    for field in fields.split(',') {
        match field.trim().split_once('=') {
            Some(("Credential", v)) => credential = Some(v.trim()),
            Some(("SignedHeaders", v)) => signed_headers = Some(v.trim()),
            Some(("Signature", v)) => signature = Some(v.trim()),
            _ => {}
        }
    }
    let (Some(credential), Some(signed_headers), Some(signature)) =
        (credential, signed_headers, signature)
    else {
        return Err(malformed_header());
    };
    let scope = Scope::parse(credential, malformed_header)?;
    check_access_key(&scope, credentials)?;

    let amz_date = header_str(request.headers, "x-amz-date").ok_or_else(|| {
        S3Error::new(
            ErrorCode::AccessDenied,
            "AWS authentication requires a valid x-amz-date header",
        )
    })?;
    let time = parse_amz_date(amz_date).ok_or_else(|| {
        S3Error::new(
            ErrorCode::AccessDenied,
            "AWS authentication requires a valid x-amz-date header",
        )
    })?;
    if !amz_date.starts_with(scope.date) {
        return Err(malformed_header());
    }
    if (now - time).abs() > MAX_SKEW {
        return Err(S3Error::new(
            ErrorCode::RequestTimeTooSkewed,
            "The difference between the request time and the current time is too large.",
        ));
    }

    let content_sha256 = header_str(request.headers, "x-amz-content-sha256").ok_or_else(|| {
        S3Error::new(
            ErrorCode::InvalidRequest,
            "Missing required header for this request: x-amz-content-sha256",
        )
    })?;
    let payload = match content_sha256 {
        "UNSIGNED-PAYLOAD" => Payload::Unsigned,
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" => Payload::StreamingSigned { trailer: false },
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER" => Payload::StreamingSigned { trailer: true },
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER" => Payload::StreamingUnsignedTrailer,
        hex_digest => {
            let mut digest = [0u8; 32];
            hex::decode_to_slice(hex_digest, &mut digest).map_err(|_| {
                S3Error::new(
                    ErrorCode::InvalidArgument,
                    "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-* or a SHA-256 in hex",
                )
            })?;
            Payload::Sha256(digest)
        }
    };

    let signed: Vec<&str> = signed_headers.split(';').collect();
    if !signed.contains(&"host") {
        return Err(S3Error::new(
            ErrorCode::AccessDenied,
            "The host header must be signed",
        ));
    }
    let key = signing_key(
        &credentials.secret_access_key,
        scope.date,
        scope.region,
        scope.service,
    );
    let scope_text = scope.text();
    let ok = canonical_uris(request).into_iter().any(|uri| {
        let canonical = canonical_request(request, &uri, None, &signed, content_sha256);
        let expected = signature_of(&key, amz_date, &scope_text, &canonical);
        constant_time_eq(&expected, signature)
    });
    if !ok {
        return Err(signature_mismatch());
    }
    Ok(Authenticated {
        payload,
        chunk_signer: ChunkSigner {
            key,
            amz_date: amz_date.to_string(),
            scope: scope_text,
            previous: signature.to_string(),
        },
    })
}

fn authenticate_query(
    request: &SignedRequest<'_>,
    credentials: &Credentials,
    now: DateTime<Utc>,
) -> Result<Authenticated, S3Error> {
    fn query_error() -> S3Error {
        S3Error::new(
            ErrorCode::AuthorizationQueryParametersError,
            "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.",
        )
    }
    let get = |name| query_value(request.query, name).ok_or_else(query_error);
    if get("X-Amz-Algorithm")? != ALGORITHM {
        return Err(query_error());
    }
    let scope = Scope::parse(get("X-Amz-Credential")?, query_error)?;
    check_access_key(&scope, credentials)?;
    let amz_date = get("X-Amz-Date")?;
    let time = parse_amz_date(amz_date).ok_or_else(query_error)?;
    if !amz_date.starts_with(scope.date) {
        return Err(query_error());
    }
    let expires: i64 = get("X-Amz-Expires")?.parse().map_err(|_| query_error())?;
    if !(1..=MAX_PRESIGNED_EXPIRY_SECS).contains(&expires) {
        return Err(query_error());
    }
    if now > time + TimeDelta::seconds(expires) {
        return Err(S3Error::new(ErrorCode::AccessDenied, "Request has expired"));
    }
    if time - now > MAX_SKEW {
        return Err(S3Error::new(
            ErrorCode::AccessDenied,
            "Request is not valid yet",
        ));
    }
    let signed: Vec<&str> = get("X-Amz-SignedHeaders")?.split(';').collect();
    let signature = get("X-Amz-Signature")?;
    let key = signing_key(
        &credentials.secret_access_key,
        scope.date,
        scope.region,
        scope.service,
    );
    let scope_text = scope.text();
    let ok = canonical_uris(request).into_iter().any(|uri| {
        let canonical = canonical_request(
            request,
            &uri,
            Some("X-Amz-Signature"),
            &signed,
            "UNSIGNED-PAYLOAD",
        );
        let expected = signature_of(&key, amz_date, &scope_text, &canonical);
        constant_time_eq(&expected, signature)
    });
    if !ok {
        return Err(signature_mismatch());
    }
    Ok(Authenticated {
        payload: Payload::Unsigned,
        chunk_signer: ChunkSigner {
            key,
            amz_date: amz_date.to_string(),
            scope: scope_text,
            previous: signature.to_string(),
        },
    })
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// S3 signs the path encoded once, exactly as SigV4 encodes. A client that
/// sends a path encoded differently (some leave `!*'()` or `$` alone) signs
/// the path as sent, so both are tried.
fn canonical_uris(request: &SignedRequest<'_>) -> Vec<String> {
    let encoded = uri_encode(request.path, true);
    let raw = if request.raw_path.is_empty() {
        "/"
    } else {
        request.raw_path
    };
    if encoded == raw {
        vec![encoded]
    } else {
        vec![encoded, raw.to_string()]
    }
}

fn canonical_request(
    request: &SignedRequest<'_>,
    uri: &str,
    skip_param: Option<&str>,
    signed_headers: &[&str],
    payload_hash: &str,
) -> String {
    let mut params: Vec<(String, String)> = request
        .query
        .iter()
        .filter(|(k, _)| Some(k.as_str()) != skip_param)
        .map(|(k, v)| (uri_encode(k, false), uri_encode(v, false)))
        .collect();
    params.sort();
    let query = params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let mut headers = String::new();
    for name in signed_headers {
        let values: Vec<String> = request
            .headers
            .get_all(*name)
            .iter()
            .map(|v| collapse_spaces(&String::from_utf8_lossy(v.as_bytes())))
            .collect();
        headers.push_str(name);
        headers.push(':');
        headers.push_str(&values.join(","));
        headers.push('\n');
    }
    format!(
        "{}\n{uri}\n{query}\n{headers}\n{}\n{payload_hash}",
        request.method,
        signed_headers.join(";")
    )
}

fn collapse_spaces(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn signature_of(key: &[u8; 32], amz_date: &str, scope: &str, canonical_request: &str) -> String {
    let string_to_sign = format!(
        "{ALGORITHM}\n{amz_date}\n{scope}\n{}",
        hex::encode(Sha256::digest(canonical_request.as_bytes()))
    );
    hex::encode(hmac(key, string_to_sign.as_bytes()))
}

/// The signer of AWS's `STREAMING-AWS4-HMAC-SHA256-PAYLOAD` example: its
/// secret, date, scope and seed signature.
#[cfg(test)]
pub(crate) fn aws_example_signer() -> ChunkSigner {
    ChunkSigner {
        key: signing_key(
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "20130524",
            "us-east-1",
            "s3",
        ),
        amz_date: "20130524T000000Z".into(),
        scope: "20130524/us-east-1/s3/aws4_request".into(),
        previous: "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    /// AWS's documented example ("GET Object" in the SigV4-for-S3 guide):
    /// its secret, request and signature.
    #[test]
    fn matches_the_aws_documentation_example() {
        let credentials = Credentials::new(
            "AKIAIOSFODNN7EXAMPLE",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        );
        let mut headers = HeaderMap::new();
        headers.insert(
            "host",
            HeaderValue::from_static("examplebucket.s3.amazonaws.com"),
        );
        headers.insert("range", HeaderValue::from_static("bytes=0-9"));
        headers.insert(
            "x-amz-content-sha256",
            HeaderValue::from_static(EMPTY_SHA256),
        );
        headers.insert("x-amz-date", HeaderValue::from_static("20130524T000000Z"));
        headers.insert(
            "authorization",
            HeaderValue::from_static(
                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
            ),
        );
        let request = SignedRequest {
            method: "GET",
            raw_path: "/test.txt",
            path: "/test.txt",
            query: &[],
            headers: &headers,
        };
        let now = parse_amz_date("20130524T000100Z").expect("date");
        let auth = authenticate(&request, &credentials, now).expect("the example verifies");
        assert_eq!(auth.payload, Payload::Sha256(hex_array(EMPTY_SHA256)));

        let wrong = Credentials::new("AKIAIOSFODNN7EXAMPLE", "not-the-secret");
        let error = authenticate(&request, &wrong, now).err().expect("refused");
        assert_eq!(error.code, ErrorCode::SignatureDoesNotMatch);
        let other = Credentials::new("AKIAOTHER", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
        let error = authenticate(&request, &other, now).err().expect("refused");
        assert_eq!(error.code, ErrorCode::InvalidAccessKeyId);
        let late = parse_amz_date("20130524T010000Z").expect("date");
        let error = authenticate(&request, &credentials, late)
            .err()
            .expect("refused");
        assert_eq!(error.code, ErrorCode::RequestTimeTooSkewed);
    }

    /// The chunk signatures of AWS's `STREAMING-AWS4-HMAC-SHA256-PAYLOAD`
    /// example (a 66560-byte body of `a`s in 64 KiB chunks).
    #[test]
    fn chains_chunk_signatures_like_the_aws_example() {
        let mut signer = aws_example_signer();
        let first = Sha256::digest(vec![b'a'; 65536]);
        assert!(signer.verify_chunk(
            &first,
            "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"
        ));
        let second = Sha256::digest(vec![b'a'; 1024]);
        assert!(signer.verify_chunk(
            &second,
            "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"
        ));
        assert!(signer.verify_chunk(
            &Sha256::digest(b""),
            "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"
        ));
        assert!(!signer.verify_chunk(&Sha256::digest(b""), "00"));
    }

    fn hex_array(text: &str) -> [u8; 32] {
        let mut out = [0u8; 32];
        hex::decode_to_slice(text, &mut out).expect("hex");
        out
    }

    #[test]
    fn encodes_like_sigv4() {
        assert_eq!(uri_encode("a b/c~d+e=", false), "a%20b%2Fc~d%2Be%3D");
        assert_eq!(uri_encode("/bucket/a b/ü", true), "/bucket/a%20b/%C3%BC");
    }
}
