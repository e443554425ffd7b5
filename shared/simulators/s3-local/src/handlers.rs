//! One handler for every request: authenticate, work out the bucket and key
//! (path style, or virtual-host style under the configured domain), pick the
//! S3 operation from the method and query, answer as S3 does.

use crate::body::BodyReader;
use crate::config::Credentials;
use crate::error::{ErrorCode, S3Error};
use crate::sigv4::{self, Authenticated, SignedRequest};
use crate::store::{
    self, Listed, MAX_PART_NUMBER, NewObject, ObjectHeaders, ObjectInfo, Store, UploadRecord,
};
use crate::xml::{self, NAMESPACE};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as TOKEN_BASE64;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use percent_encoding::percent_decode_str;
use std::sync::Arc;

/// S3's limit for one PUT (and one part).
const MAX_PUT_SIZE: u64 = 5 * 1024 * 1024 * 1024;
/// XML request bodies (a 1000-key delete is ~100 KB).
const MAX_XML_BODY: u64 = 2 * 1024 * 1024;
const MAX_KEYS: usize = 1000;
const READ_CHUNK: usize = 256 * 1024;

#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) store: Store,
    pub(crate) credentials: Arc<Credentials>,
    pub(crate) region: Arc<str>,
    pub(crate) virtual_host_domain: Option<Arc<str>>,
}

type Query = Vec<(String, String)>;

fn query_get<'a>(query: &'a Query, name: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn query_has(query: &Query, name: &str) -> bool {
    query.iter().any(|(k, _)| k == name)
}

/// Decodes a query string; `+` is a space, as S3 reads it.
fn parse_query(raw: Option<&str>) -> Result<Query, S3Error> {
    let mut out = Vec::new();
    for pair in raw.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        out.push((decode_component(name)?, decode_component(value)?));
    }
    Ok(out)
}

fn decode_component(text: &str) -> Result<String, S3Error> {
    percent_decode_str(&text.replace('+', " "))
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| S3Error::new(ErrorCode::InvalidArgument, "The URI is not valid UTF-8"))
}

fn header_str(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// The bucket and key a request addresses; either may be empty.
pub(crate) fn route<'a>(
    host: Option<&str>,
    path: &'a str,
    virtual_host_domain: Option<&str>,
) -> (String, &'a str) {
    let rest = path.strip_prefix('/').unwrap_or(path);
    if let (Some(host), Some(domain)) = (host, virtual_host_domain) {
        // `bucket.localhost:9000` → bucket; the port is irrelevant.
        let name = host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                host
            }
        });
        if let Some(bucket) = name
            .strip_suffix(domain)
            .and_then(|b| b.strip_suffix('.'))
            .filter(|b| store::check_bucket_name(b).is_ok())
        {
            return (bucket.to_string(), rest);
        }
    }
    match rest.split_once('/') {
        Some((bucket, key)) => (bucket.to_string(), key),
        None => (rest.to_string(), ""),
    }
}

pub(crate) async fn handle(State(state): State<AppState>, request: Request) -> Response {
    let request_id = uuid::Uuid::new_v4().simple().to_string()[..16].to_uppercase();
    let method = request.method().clone();
    let uri = request.uri().clone();
    let mut response = match dispatch(&state, request).await {
        Ok(response) => response,
        Err(error) => {
            tracing::debug!(%method, %uri, %error, "floe-s3-local: request refused");
            error_response(&error, &request_id)
        }
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        headers.insert("x-amz-request-id", value);
    }
    headers.insert(header::SERVER, HeaderValue::from_static("floe-s3-local"));
    tracing::debug!(%method, %uri, status = response.status().as_u16(), "floe-s3-local");
    response
}

fn error_response(error: &S3Error, request_id: &str) -> Response {
    let status = error.code.status();
    let mut response = Response::new(Body::from(error.to_xml(request_id)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml"),
    );
    response
}

fn status_only(status: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

fn xml_response(body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml"),
    );
    response
}

fn xml_document(root: &str, content: impl FnOnce(&mut String)) -> String {
    let mut out = String::from(r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    out.push_str(&format!(r#"<{root} xmlns="{NAMESPACE}">"#));
    content(&mut out);
    out.push_str(&format!("</{root}>"));
    out
}

fn set_header(response: &mut Response, name: &str, value: &str) {
    if let (Ok(name), Ok(value)) = (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(value),
    ) {
        response.headers_mut().insert(name, value);
    }
}

/// S3's subresources that this store does not implement; asking for one
/// gets 501 rather than an answer about something else.
const UNSUPPORTED_BUCKET: &[&str] = &[
    "accelerate",
    "acl",
    "analytics",
    "cors",
    "encryption",
    "intelligent-tiering",
    "inventory",
    "lifecycle",
    "logging",
    "metrics",
    "notification",
    "object-lock",
    "ownershipControls",
    "policy",
    "policyStatus",
    "publicAccessBlock",
    "replication",
    "requestPayment",
    "tagging",
    "uploads",
    "versions",
    "website",
];
const UNSUPPORTED_OBJECT: &[&str] = &[
    "acl",
    "attributes",
    "legal-hold",
    "restore",
    "retention",
    "select",
    "tagging",
    "torrent",
];

fn not_implemented(what: &str) -> S3Error {
    S3Error::new(
        ErrorCode::NotImplemented,
        format!("floe-s3-local does not implement {what}"),
    )
}

async fn dispatch(state: &AppState, request: Request) -> Result<Response, S3Error> {
    let (parts, body) = request.into_parts();
    let raw_path = parts.uri.path().to_string();
    let path = percent_decode_str(&raw_path)
        .decode_utf8()
        .map_err(|_| S3Error::new(ErrorCode::InvalidArgument, "The URI is not valid UTF-8"))?
        .into_owned();
    let query = parse_query(parts.uri.query())?;
    let auth = sigv4::authenticate(
        &SignedRequest {
            method: parts.method.as_str(),
            raw_path: &raw_path,
            path: &path,
            query: &query,
            headers: &parts.headers,
        },
        &state.credentials,
        Utc::now(),
    )?;
    let host = header_str(&parts.headers, header::HOST);
    let (bucket, key) = route(host, &path, state.virtual_host_domain.as_deref());
    let request = Req {
        state,
        headers: &parts.headers,
        query: &query,
        bucket: &bucket,
        key,
    };
    let method = parts.method.clone();

    if bucket.is_empty() {
        return match method {
            Method::GET => list_buckets(state).await,
            _ => Err(S3Error::new(
                ErrorCode::MethodNotAllowed,
                "The specified method is not allowed against this resource.",
            )),
        };
    }
    if let Err(reason) = store::check_bucket_name(&bucket) {
        return Err(store::bucket_name_error(&bucket, reason));
    }

    if key.is_empty() {
        if let Some(sub) = UNSUPPORTED_BUCKET.iter().find(|s| query_has(&query, s)) {
            return Err(not_implemented(&format!("the ?{sub} subresource")));
        }
        return match method {
            Method::PUT => {
                // The body (CreateBucketConfiguration) only names a region.
                BodyReader::new(body, &parts.headers, auth, MAX_XML_BODY)?
                    .collect()
                    .await?;
                state.store.create_bucket(&bucket).await?;
                let mut response = status_only(StatusCode::OK);
                set_header(&mut response, "location", &format!("/{bucket}"));
                Ok(response)
            }
            Method::HEAD => {
                state.store.check_bucket(&bucket).await?;
                let mut response = status_only(StatusCode::OK);
                set_header(&mut response, "x-amz-bucket-region", &state.region);
                Ok(response)
            }
            Method::DELETE => {
                state.store.delete_bucket(&bucket).await?;
                Ok(status_only(StatusCode::NO_CONTENT))
            }
            Method::GET if query_has(&query, "location") => {
                state.store.check_bucket(&bucket).await?;
                // us-east-1 is the empty constraint, as S3 answers.
                let region = if &*state.region == "us-east-1" {
                    ""
                } else {
                    &state.region
                };
                Ok(xml_response(xml_document("LocationConstraint", |out| {
                    xml::escape_into(out, region)
                })))
            }
            Method::GET if query_has(&query, "versioning") => {
                state.store.check_bucket(&bucket).await?;
                Ok(xml_response(xml_document(
                    "VersioningConfiguration",
                    |_| {},
                )))
            }
            Method::GET => list_objects(&request).await,
            Method::POST if query_has(&query, "delete") => {
                let body = BodyReader::new(body, &parts.headers, auth, MAX_XML_BODY)?
                    .collect()
                    .await?;
                delete_objects(&request, &body).await
            }
            _ => Err(S3Error::new(
                ErrorCode::MethodNotAllowed,
                "The specified method is not allowed against this resource.",
            )),
        };
    }

    store::check_key(key)?;
    if let Some(sub) = UNSUPPORTED_OBJECT.iter().find(|s| query_has(&query, s)) {
        return Err(not_implemented(&format!("the ?{sub} subresource")));
    }
    match method {
        Method::PUT if query_has(&query, "uploadId") => {
            if parts.headers.contains_key("x-amz-copy-source") {
                return Err(not_implemented("UploadPartCopy"));
            }
            upload_part(&request, body, auth).await
        }
        Method::PUT if parts.headers.contains_key("x-amz-copy-source") => {
            copy_object(&request).await
        }
        Method::PUT => put_object(&request, body, auth).await,
        Method::GET if query_has(&query, "uploadId") => Err(not_implemented("ListParts")),
        Method::GET => get_object(&request, true).await,
        Method::HEAD => get_object(&request, false).await,
        Method::DELETE if query_has(&query, "uploadId") => {
            let upload_id = query_get(&query, "uploadId").unwrap_or_default();
            state.store.check_bucket(&bucket).await?;
            state.store.upload(&bucket, key, upload_id).await?;
            state.store.remove_upload(upload_id).await?;
            Ok(status_only(StatusCode::NO_CONTENT))
        }
        Method::DELETE => {
            state.store.check_bucket(&bucket).await?;
            state.store.delete_object(&bucket, key).await?;
            Ok(status_only(StatusCode::NO_CONTENT))
        }
        Method::POST if query_has(&query, "uploads") => create_upload(&request).await,
        Method::POST if query_has(&query, "uploadId") => {
            let body = BodyReader::new(body, &parts.headers, auth, MAX_XML_BODY)?
                .collect()
                .await?;
            complete_upload(&request, &body).await
        }
        _ => Err(S3Error::new(
            ErrorCode::MethodNotAllowed,
            "The specified method is not allowed against this resource.",
        )),
    }
}

/// What every object operation needs of the request.
struct Req<'a> {
    state: &'a AppState,
    headers: &'a HeaderMap,
    query: &'a Query,
    bucket: &'a str,
    key: &'a str,
}

fn object_headers(headers: &HeaderMap) -> ObjectHeaders {
    let get = |name: header::HeaderName| header_str(headers, name).map(str::to_string);
    // `aws-chunked` describes the transfer, not the object.
    let content_encoding = header_str(headers, header::CONTENT_ENCODING)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|e| !e.eq_ignore_ascii_case("aws-chunked") && !e.is_empty())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .filter(|v| !v.is_empty());
    let user = headers
        .iter()
        .filter_map(|(name, value)| {
            let name = name.as_str().strip_prefix("x-amz-meta-")?;
            Some((name.to_string(), value.to_str().ok()?.to_string()))
        })
        .collect();
    ObjectHeaders {
        content_type: get(header::CONTENT_TYPE),
        content_encoding,
        content_disposition: get(header::CONTENT_DISPOSITION),
        content_language: get(header::CONTENT_LANGUAGE),
        cache_control: get(header::CACHE_CONTROL),
        expires: get(header::EXPIRES),
        user,
    }
}

async fn put_object(req: &Req<'_>, body: Body, auth: Authenticated) -> Result<Response, S3Error> {
    let store = &req.state.store;
    store.check_bucket(req.bucket).await?;
    let if_absent = match header_str(req.headers, header::IF_NONE_MATCH) {
        None => false,
        Some("*") => true,
        Some(_) => return Err(not_implemented("If-None-Match other than * on PUT")),
    };
    let mut reader = BodyReader::new(body, req.headers, auth, MAX_PUT_SIZE)?;
    let mut temp = store.temp_file().await?;
    while let Some(data) = reader.next().await? {
        temp.write(&data).await?;
    }
    let summary = reader.finish().await?;
    let info = store
        .commit_object(
            req.bucket,
            req.key,
            temp,
            NewObject {
                etag: summary.md5_hex,
                headers: object_headers(req.headers),
                checksum: summary.checksum,
            },
            if_absent,
        )
        .await?;
    let mut response = status_only(StatusCode::OK);
    set_header(&mut response, "etag", &info.quoted_etag());
    if let Some(checksum) = &info.checksum {
        set_header(
            &mut response,
            checksum.algorithm.header_name(),
            &checksum.value,
        );
    }
    Ok(response)
}

/// `x-amz-copy-source`: `[/]bucket/key[?versionId=…]`, URL-encoded.
async fn copy_object(req: &Req<'_>) -> Result<Response, S3Error> {
    let store = &req.state.store;
    let source = header_str(req.headers, "x-amz-copy-source").unwrap_or_default();
    let source = source.split_once('?').map_or(source, |(s, _)| s);
    let source = percent_decode_str(source).decode_utf8().map_err(|_| {
        S3Error::new(
            ErrorCode::InvalidArgument,
            "x-amz-copy-source is not valid UTF-8",
        )
    })?;
    let source = source.strip_prefix('/').unwrap_or(&source);
    let Some((source_bucket, source_key)) = source.split_once('/') else {
        return Err(S3Error::new(
            ErrorCode::InvalidArgument,
            "Copy Source must mention the source bucket and key: sourcebucket/sourcekey",
        ));
    };
    if let Err(reason) = store::check_bucket_name(source_bucket) {
        return Err(store::bucket_name_error(source_bucket, reason));
    }
    store::check_key(source_key)?;
    store.check_bucket(req.bucket).await?;
    let info = store.object(source_bucket, source_key).await?;
    let headers = match header_str(req.headers, "x-amz-metadata-directive") {
        Some(d) if d.eq_ignore_ascii_case("REPLACE") => object_headers(req.headers),
        None => info.headers.clone(),
        Some(d) if d.eq_ignore_ascii_case("COPY") => info.headers.clone(),
        Some(_) => {
            return Err(S3Error::new(
                ErrorCode::InvalidArgument,
                "Unknown metadata directive.",
            ));
        }
    };
    let mut source = tokio::fs::File::open(&info.path)
        .await
        .map_err(|e| S3Error::internal("opening a copy source", e))?;
    let mut temp = store.temp_file().await?;
    let mut md5 = <md5::Md5 as md5::Digest>::new();
    let mut checksum = info
        .checksum
        .as_ref()
        .map(|c| (c.algorithm, c.algorithm.hasher()));
    let mut buffer = vec![0u8; READ_CHUNK];
    loop {
        use tokio::io::AsyncReadExt;
        let n = source
            .read(&mut buffer)
            .await
            .map_err(|e| S3Error::internal("reading a copy source", e))?;
        if n == 0 {
            break;
        }
        md5::Digest::update(&mut md5, &buffer[..n]);
        if let Some((_, hasher)) = &mut checksum {
            hasher.update(&buffer[..n]);
        }
        temp.write(&buffer[..n]).await?;
    }
    let checksum = checksum.map(|(algorithm, hasher)| store::StoredChecksum {
        algorithm,
        value: hasher.finish_base64(),
    });
    let copied = store
        .commit_object(
            req.bucket,
            req.key,
            temp,
            NewObject {
                etag: hex::encode(md5::Digest::finalize(md5)),
                headers,
                checksum,
            },
            false,
        )
        .await?;
    Ok(xml_response(xml_document("CopyObjectResult", |out| {
        xml::element(out, "LastModified", &iso8601(copied.last_modified));
        xml::element(out, "ETag", &copied.quoted_etag());
    })))
}

fn iso8601(time: DateTime<Utc>) -> String {
    time.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

fn http_date(time: DateTime<Utc>) -> String {
    time.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// A `Range: bytes=…` header against an object of `size` bytes: the
/// inclusive first and last byte. A header this store does not understand
/// (several ranges, other units) is ignored, as HTTP allows.
fn parse_range(text: &str, size: u64) -> Result<Option<(u64, u64)>, S3Error> {
    let Some(spec) = text.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((first, last)) = spec.split_once('-') else {
        return Ok(None);
    };
    let (first, last) = (first.trim(), last.trim());
    let unsatisfiable = || {
        S3Error::new(
            ErrorCode::InvalidRange,
            "The requested range is not satisfiable",
        )
    };
    let range = if first.is_empty() {
        // The last N bytes.
        let Ok(n) = last.parse::<u64>() else {
            return Ok(None);
        };
        if n == 0 || size == 0 {
            return Err(unsatisfiable());
        }
        (size.saturating_sub(n), size - 1)
    } else {
        let Ok(start) = first.parse::<u64>() else {
            return Ok(None);
        };
        let end = if last.is_empty() {
            u64::MAX
        } else {
            match last.parse::<u64>() {
                Ok(end) if end >= start => end,
                _ => return Ok(None),
            }
        };
        if start >= size {
            return Err(unsatisfiable());
        }
        (start, end.min(size - 1))
    };
    Ok(Some(range))
}

fn etag_matches(condition: &str, etag: &str) -> bool {
    condition
        .split(',')
        .map(|c| c.trim().trim_start_matches("W/").trim_matches('"'))
        .any(|c| c == "*" || c == etag)
}

async fn get_object(req: &Req<'_>, with_body: bool) -> Result<Response, S3Error> {
    if query_has(req.query, "partNumber") {
        return Err(not_implemented("GetObject by partNumber"));
    }
    let info = req.state.store.object(req.bucket, req.key).await?;
    if let Some(condition) = header_str(req.headers, header::IF_MATCH)
        && !etag_matches(condition, &info.etag)
    {
        return Err(S3Error::new(
            ErrorCode::PreconditionFailed,
            "At least one of the pre-conditions you specified did not hold",
        ));
    }
    if let Some(condition) = header_str(req.headers, header::IF_NONE_MATCH)
        && etag_matches(condition, &info.etag)
    {
        let mut response = status_only(StatusCode::NOT_MODIFIED);
        set_header(&mut response, "etag", &info.quoted_etag());
        return Ok(response);
    }
    let range = match header_str(req.headers, header::RANGE) {
        Some(text) => parse_range(text, info.size)?,
        None => None,
    };
    let (start, length) = match range {
        Some((first, last)) => (first, last - first + 1),
        None => (0, info.size),
    };
    let body = if with_body {
        file_body(&info, start, length).await?
    } else {
        Body::empty()
    };
    let mut response = Response::new(body);
    if let Some((first, last)) = range {
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
        set_header(
            &mut response,
            "content-range",
            &format!("bytes {first}-{last}/{}", info.size),
        );
    }
    set_header(&mut response, "content-length", &length.to_string());
    set_header(&mut response, "accept-ranges", "bytes");
    set_header(&mut response, "etag", &info.quoted_etag());
    set_header(
        &mut response,
        "last-modified",
        &http_date(info.last_modified),
    );
    object_response_headers(&mut response, &info, req.query);
    // A checksum covers the whole object, so it is sent only with it, and
    // only when asked for (the SDKs then verify it).
    if range.is_none()
        && header_str(req.headers, "x-amz-checksum-mode")
            .is_some_and(|m| m.eq_ignore_ascii_case("ENABLED"))
        && let Some(checksum) = &info.checksum
    {
        set_header(
            &mut response,
            checksum.algorithm.header_name(),
            &checksum.value,
        );
    }
    Ok(response)
}

fn object_response_headers(response: &mut Response, info: &ObjectInfo, query: &Query) {
    let h = &info.headers;
    // `response-*` query parameters (presigned URLs) override the stored
    // headers, as in S3.
    let pick = |param: &str, stored: &Option<String>| -> Option<String> {
        query_get(query, param)
            .map(str::to_string)
            .or_else(|| stored.clone())
    };
    let content_type = pick("response-content-type", &h.content_type)
        .unwrap_or_else(|| "binary/octet-stream".to_string());
    set_header(response, "content-type", &content_type);
    for (name, param, stored) in [
        (
            "content-encoding",
            "response-content-encoding",
            &h.content_encoding,
        ),
        (
            "content-disposition",
            "response-content-disposition",
            &h.content_disposition,
        ),
        (
            "content-language",
            "response-content-language",
            &h.content_language,
        ),
        ("cache-control", "response-cache-control", &h.cache_control),
        ("expires", "response-expires", &h.expires),
    ] {
        if let Some(value) = pick(param, stored) {
            set_header(response, name, &value);
        }
    }
    for (name, value) in &h.user {
        set_header(response, &format!("x-amz-meta-{name}"), value);
    }
}

/// `length` bytes of the object from `start`, streamed.
async fn file_body(info: &ObjectInfo, start: u64, length: u64) -> Result<Body, S3Error> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut file = tokio::fs::File::open(&info.path)
        .await
        .map_err(|e| S3Error::internal("opening an object", e))?;
    if start > 0 {
        file.seek(std::io::SeekFrom::Start(start))
            .await
            .map_err(|e| S3Error::internal("seeking in an object", e))?;
    }
    let stream = futures_util::stream::unfold((file, length), |(mut file, left)| async move {
        if left == 0 {
            return None;
        }
        let want = usize::try_from(left).unwrap_or(READ_CHUNK).min(READ_CHUNK);
        let mut buffer = vec![0u8; want];
        match file.read(&mut buffer).await {
            // The file shrank under us (replaced objects are renamed over it,
            // so this one is gone from the folder but still readable; a
            // truncation by hand would end here).
            Ok(0) => Some((
                Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "object shorter than its size",
                )),
                (file, 0),
            )),
            Ok(n) => {
                buffer.truncate(n);
                Some((Ok(Bytes::from(buffer)), (file, left - n as u64)))
            }
            Err(e) => Some((Err(e), (file, 0))),
        }
    });
    Ok(Body::from_stream(stream))
}

async fn list_buckets(state: &AppState) -> Result<Response, S3Error> {
    let buckets = state.store.list_buckets().await?;
    Ok(xml_response(xml_document(
        "ListAllMyBucketsResult",
        |out| {
            out.push_str("<Owner>");
            xml::element(out, "ID", &state.credentials.access_key_id);
            xml::element(out, "DisplayName", "floe-local");
            out.push_str("</Owner><Buckets>");
            for (name, created) in &buckets {
                out.push_str("<Bucket>");
                xml::element(out, "Name", name);
                xml::element(out, "CreationDate", &iso8601(*created));
                out.push_str("</Bucket>");
            }
            out.push_str("</Buckets>");
        },
    )))
}

/// One page of a listing: objects and common prefixes, in key order.
struct Page<'a> {
    contents: Vec<&'a Listed>,
    prefixes: Vec<String>,
    truncated: bool,
    /// The last key or common prefix returned; the next page starts after.
    last: Option<String>,
}

/// Keys after `after` (and, when `after` is a common prefix, not under
/// it), rolled up at `delimiter`, at most `max` entries.
fn paginate<'a>(
    listed: &'a [Listed],
    prefix: &str,
    delimiter: Option<&str>,
    after: Option<&str>,
    max: usize,
) -> Page<'a> {
    let mut page = Page {
        contents: Vec::new(),
        prefixes: Vec::new(),
        truncated: false,
        last: None,
    };
    for item in listed {
        let rolled_up = delimiter.filter(|d| !d.is_empty()).and_then(|d| {
            item.key[prefix.len()..]
                .find(d)
                .map(|i| item.key[..prefix.len() + i + d.len()].to_string())
        });
        if let Some(after) = after
            && (item.key.as_str() <= after || rolled_up.as_deref() == Some(after))
        {
            continue;
        }
        if let Some(common) = &rolled_up
            && page.prefixes.last() == Some(common)
        {
            continue;
        }
        if page.contents.len() + page.prefixes.len() >= max {
            page.truncated = true;
            break;
        }
        match rolled_up {
            Some(common) => {
                page.last = Some(common.clone());
                page.prefixes.push(common);
            }
            None => {
                page.last = Some(item.key.clone());
                page.contents.push(item);
            }
        }
    }
    page
}

/// `encoding-type=url` asks for keys URL-encoded in the answer (the AWS CLI
/// always asks, and decodes).
fn encode_key(text: &str, url: bool) -> String {
    if url {
        sigv4::uri_encode(text, true)
    } else {
        text.to_string()
    }
}

async fn list_objects(req: &Req<'_>) -> Result<Response, S3Error> {
    let query = req.query;
    let v2 = query_get(query, "list-type") == Some("2");
    let prefix = query_get(query, "prefix").unwrap_or_default();
    let delimiter = query_get(query, "delimiter").filter(|d| !d.is_empty());
    let url = match query_get(query, "encoding-type") {
        None => false,
        Some("url") => true,
        Some(_) => {
            return Err(S3Error::new(
                ErrorCode::InvalidArgument,
                "Invalid Encoding Method specified in Request",
            ));
        }
    };
    let max = match query_get(query, "max-keys") {
        None => MAX_KEYS,
        Some(text) => text
            .parse::<usize>()
            .map_err(|_| {
                S3Error::new(
                    ErrorCode::InvalidArgument,
                    "Provided max-keys not an integer or within integer range",
                )
            })?
            .min(MAX_KEYS),
    };
    let token = match query_get(query, "continuation-token").filter(|_| v2) {
        Some(token) => Some(
            TOKEN_BASE64
                .decode(token)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| {
                    S3Error::new(
                        ErrorCode::InvalidArgument,
                        "The continuation token provided is incorrect",
                    )
                })?,
        ),
        None => None,
    };
    let start_after = query_get(query, "start-after").filter(|_| v2);
    let marker = query_get(query, "marker").filter(|_| !v2);
    let after = token.as_deref().or(start_after).or(marker);

    let listed = req.state.store.list(req.bucket, prefix).await?;
    let page = paginate(&listed, prefix, delimiter, after, max);
    let body = xml_document("ListBucketResult", |out| {
        xml::element(out, "Name", req.bucket);
        xml::element(out, "Prefix", &encode_key(prefix, url));
        if let Some(delimiter) = delimiter {
            xml::element(out, "Delimiter", &encode_key(delimiter, url));
        }
        xml::element(out, "MaxKeys", &max.to_string());
        if url {
            xml::element(out, "EncodingType", "url");
        }
        xml::element(
            out,
            "IsTruncated",
            if page.truncated { "true" } else { "false" },
        );
        let next = page.last.as_deref().filter(|_| page.truncated);
        if v2 {
            xml::element(
                out,
                "KeyCount",
                &(page.contents.len() + page.prefixes.len()).to_string(),
            );
            if let Some(token) = query_get(query, "continuation-token") {
                xml::element(out, "ContinuationToken", token);
            }
            if let Some(start_after) = start_after {
                xml::element(out, "StartAfter", &encode_key(start_after, url));
            }
            if let Some(next) = next {
                xml::element(out, "NextContinuationToken", &TOKEN_BASE64.encode(next));
            }
        } else {
            xml::element(out, "Marker", &encode_key(marker.unwrap_or_default(), url));
            if let Some(next) = next {
                xml::element(out, "NextMarker", &encode_key(next, url));
            }
        }
        for item in &page.contents {
            out.push_str("<Contents>");
            xml::element(out, "Key", &encode_key(&item.key, url));
            xml::element(out, "LastModified", &iso8601(item.info.last_modified));
            xml::element(out, "ETag", &item.info.quoted_etag());
            xml::element(out, "Size", &item.info.size.to_string());
            xml::element(out, "StorageClass", "STANDARD");
            out.push_str("</Contents>");
        }
        for common in &page.prefixes {
            out.push_str("<CommonPrefixes>");
            xml::element(out, "Prefix", &encode_key(common, url));
            out.push_str("</CommonPrefixes>");
        }
    });
    Ok(xml_response(body))
}

fn xml_text(body: &[u8]) -> Result<&str, S3Error> {
    std::str::from_utf8(body).map_err(|_| {
        S3Error::new(
            ErrorCode::MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published schema.",
        )
    })
}

async fn delete_objects(req: &Req<'_>, body: &[u8]) -> Result<Response, S3Error> {
    req.state.store.check_bucket(req.bucket).await?;
    let root = xml::parse(xml_text(body)?)?;
    let malformed = || {
        S3Error::new(
            ErrorCode::MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published schema.",
        )
    };
    if root.name != "Delete" {
        return Err(malformed());
    }
    let quiet = root.child_text("Quiet").is_some_and(|q| q.trim() == "true");
    let keys: Vec<&str> = root
        .children_named("Object")
        .map(|o| o.child_text("Key").ok_or_else(malformed))
        .collect::<Result<_, _>>()?;
    if keys.is_empty() || keys.len() > MAX_KEYS {
        return Err(malformed());
    }
    let mut deleted = Vec::new();
    let mut failed = Vec::new();
    for key in keys {
        let result = match store::check_key(key) {
            Ok(()) => req.state.store.delete_object(req.bucket, key).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => deleted.push(key),
            Err(error) => failed.push((key, error)),
        }
    }
    Ok(xml_response(xml_document("DeleteResult", |out| {
        if !quiet {
            for key in &deleted {
                out.push_str("<Deleted>");
                xml::element(out, "Key", key);
                out.push_str("</Deleted>");
            }
        }
        for (key, error) in &failed {
            out.push_str("<Error>");
            xml::element(out, "Key", key);
            xml::element(out, "Code", error.code.as_str());
            xml::element(out, "Message", &error.message);
            out.push_str("</Error>");
        }
    })))
}

async fn create_upload(req: &Req<'_>) -> Result<Response, S3Error> {
    let store = &req.state.store;
    store.check_bucket(req.bucket).await?;
    let upload_id = store
        .create_upload(UploadRecord {
            bucket: req.bucket.to_string(),
            key: req.key.to_string(),
            headers: object_headers(req.headers),
            initiated: Utc::now(),
        })
        .await?;
    Ok(xml_response(xml_document(
        "InitiateMultipartUploadResult",
        |out| {
            xml::element(out, "Bucket", req.bucket);
            xml::element(out, "Key", req.key);
            xml::element(out, "UploadId", &upload_id);
        },
    )))
}

fn part_number(text: &str) -> Result<u32, S3Error> {
    text.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_PART_NUMBER).contains(n))
        .ok_or_else(|| {
            S3Error::new(
                ErrorCode::InvalidArgument,
                "Part number must be an integer between 1 and 10000, inclusive",
            )
        })
}

async fn upload_part(req: &Req<'_>, body: Body, auth: Authenticated) -> Result<Response, S3Error> {
    let store = &req.state.store;
    let upload_id = query_get(req.query, "uploadId").unwrap_or_default();
    let number = part_number(query_get(req.query, "partNumber").unwrap_or_default())?;
    store.check_bucket(req.bucket).await?;
    store.upload(req.bucket, req.key, upload_id).await?;
    let mut reader = BodyReader::new(body, req.headers, auth, MAX_PUT_SIZE)?;
    let mut temp = store.temp_file().await?;
    while let Some(data) = reader.next().await? {
        temp.write(&data).await?;
    }
    let summary = reader.finish().await?;
    store
        .commit_part(upload_id, number, temp, summary.md5_hex.clone())
        .await?;
    let mut response = status_only(StatusCode::OK);
    set_header(&mut response, "etag", &format!("\"{}\"", summary.md5_hex));
    if let Some(checksum) = &summary.checksum {
        set_header(
            &mut response,
            checksum.algorithm.header_name(),
            &checksum.value,
        );
    }
    Ok(response)
}

async fn complete_upload(req: &Req<'_>, body: &[u8]) -> Result<Response, S3Error> {
    let store = &req.state.store;
    let upload_id = query_get(req.query, "uploadId").unwrap_or_default();
    store.check_bucket(req.bucket).await?;
    let record = store.upload(req.bucket, req.key, upload_id).await?;
    let root = xml::parse(xml_text(body)?)?;
    let malformed = || {
        S3Error::new(
            ErrorCode::MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published schema.",
        )
    };
    if root.name != "CompleteMultipartUpload" {
        return Err(malformed());
    }
    let mut parts = Vec::new();
    for part in root.children_named("Part") {
        let number = part_number(part.child_text("PartNumber").ok_or_else(malformed)?.trim())?;
        let etag = part.child_text("ETag").ok_or_else(malformed)?.to_string();
        if parts.last().is_some_and(|(last, _)| *last >= number) {
            return Err(S3Error::new(
                ErrorCode::InvalidPartOrder,
                "The list of parts was not in ascending order. The parts list must be specified in order by part number.",
            ));
        }
        parts.push((number, etag));
    }
    if parts.is_empty() {
        return Err(malformed());
    }
    let (temp, etag) = store.assemble_parts(upload_id, &parts).await?;
    let info = store
        .commit_object(
            req.bucket,
            req.key,
            temp,
            NewObject {
                etag,
                headers: record.headers,
                checksum: None,
            },
            false,
        )
        .await?;
    if let Err(error) = store.remove_upload(upload_id).await {
        // The object is complete; a leftover part folder only costs space.
        tracing::warn!(%error, upload_id, "floe-s3-local: could not remove a completed upload");
    }
    Ok(xml_response(xml_document(
        "CompleteMultipartUploadResult",
        |out| {
            let host = header_str(req.headers, header::HOST).unwrap_or("127.0.0.1");
            xml::element(
                out,
                "Location",
                &format!(
                    "http://{host}/{}/{}",
                    req.bucket,
                    sigv4::uri_encode(req.key, true)
                ),
            );
            xml::element(out, "Bucket", req.bucket);
            xml::element(out, "Key", req.key);
            xml::element(out, "ETag", &info.quoted_etag());
        },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_path_and_virtual_host_style() {
        let d = Some("localhost");
        assert_eq!(
            route(Some("127.0.0.1:9000"), "/b1b/k/x", d),
            ("b1b".into(), "k/x")
        );
        assert_eq!(route(Some("127.0.0.1:9000"), "/b1b", d), ("b1b".into(), ""));
        assert_eq!(
            route(Some("127.0.0.1:9000"), "/b1b/", d),
            ("b1b".into(), "")
        );
        assert_eq!(route(Some("127.0.0.1:9000"), "/", d), ("".into(), ""));
        assert_eq!(
            route(Some("snaps.localhost:9000"), "/k/x", d),
            ("snaps".into(), "k/x")
        );
        assert_eq!(route(Some("snaps.localhost"), "/", d), ("snaps".into(), ""));
        assert_eq!(
            route(Some("localhost:9000"), "/snaps/k", d),
            ("snaps".into(), "k")
        );
        assert_eq!(
            route(Some("snaps.localhost:9000"), "/snaps/k", None),
            ("snaps".into(), "k")
        );
    }

    #[test]
    fn parses_ranges_like_s3() {
        assert_eq!(parse_range("bytes=0-9", 100).ok().flatten(), Some((0, 9)));
        assert_eq!(parse_range("bytes=90-", 100).ok().flatten(), Some((90, 99)));
        assert_eq!(parse_range("bytes=-10", 100).ok().flatten(), Some((90, 99)));
        assert_eq!(parse_range("bytes=-500", 100).ok().flatten(), Some((0, 99)));
        assert_eq!(
            parse_range("bytes=50-5000", 100).ok().flatten(),
            Some((50, 99))
        );
        assert_eq!(parse_range("bytes=0-1,5-6", 100).ok().flatten(), None);
        assert_eq!(parse_range("items=0-1", 100).ok().flatten(), None);
        assert_eq!(parse_range("bytes=9-1", 100).ok().flatten(), None);
        assert!(parse_range("bytes=100-", 100).is_err());
        assert!(parse_range("bytes=0-0", 0).is_err());
    }

    fn listed(keys: &[&str]) -> Vec<Listed> {
        keys.iter()
            .map(|k| Listed {
                key: k.to_string(),
                info: ObjectInfo {
                    path: std::path::PathBuf::new(),
                    size: 0,
                    etag: String::new(),
                    last_modified: Utc::now(),
                    headers: ObjectHeaders::default(),
                    checksum: None,
                },
            })
            .collect()
    }

    #[test]
    fn paginates_with_delimiter_across_pages() {
        let items = listed(&["a", "d/1", "d/2", "d/3", "e", "f/1"]);
        let page = paginate(&items, "", Some("/"), None, 2);
        assert_eq!(page.contents.len(), 1);
        assert_eq!(page.prefixes, ["d/"]);
        assert!(page.truncated);
        assert_eq!(page.last.as_deref(), Some("d/"));
        let page = paginate(&items, "", Some("/"), Some("d/"), 2);
        assert_eq!(
            page.contents
                .iter()
                .map(|l| l.key.as_str())
                .collect::<Vec<_>>(),
            ["e"]
        );
        assert_eq!(page.prefixes, ["f/"]);
        assert!(!page.truncated);
        // start-after a key inside a prefix still rolls the rest up.
        let page = paginate(&items, "", Some("/"), Some("d/1"), 10);
        assert_eq!(page.prefixes, ["d/", "f/"]);
    }
}
