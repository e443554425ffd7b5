//! The real AWS SDK for Rust, default-configured but for the endpoint (on
//! loopback) and path style, against the store.

use aws_sdk_s3::Client;
use aws_sdk_s3::config::{BehaviorVersion, Region};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, Delete, ObjectIdentifier};
use floe_s3_local::{Credentials, LocalS3, LocalS3Config, RunningS3, S3LocalError};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ACCESS_KEY: &str = "FLOELOCALTESTKEY0001";
const SECRET_KEY: &str = "floe-local-test-secret-0123456789abcdefg";
const BUCKET: &str = "floe-snapshots";

fn credentials() -> Credentials {
    Credentials::new(ACCESS_KEY, SECRET_KEY)
}

async fn start(root: &std::path::Path) -> RunningS3 {
    LocalS3::start(LocalS3Config::new(root, credentials()).with_bucket(BUCKET))
        .await
        .expect("the store starts")
}

fn client_with(s3: &RunningS3, access_key: &str, secret_key: &str) -> Client {
    let credentials =
        aws_sdk_s3::config::Credentials::new(access_key, secret_key, None, None, "test");
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(credentials)
        .endpoint_url(s3.endpoint_url())
        .force_path_style(true)
        .build();
    Client::from_conf(config)
}

fn client(s3: &RunningS3) -> Client {
    client_with(s3, ACCESS_KEY, SECRET_KEY)
}

fn code<E, R>(error: &aws_sdk_s3::error::SdkError<E, R>) -> Option<String>
where
    E: aws_sdk_s3::error::ProvideErrorMetadata,
{
    error
        .as_service_error()
        .and_then(|e| e.code().map(str::to_string))
}

fn status<E>(
    error: &aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> Option<u16> {
    error.raw_response().map(|r| r.status().as_u16())
}

async fn get_bytes(client: &Client, key: &str) -> Vec<u8> {
    client
        .get_object()
        .bucket(BUCKET)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("get {key}: {}", aws_sdk_s3::error::DisplayErrorContext(e)))
        .body
        .collect()
        .await
        .expect("body")
        .to_vec()
}

async fn put_bytes(client: &Client, key: &str, bytes: Vec<u8>) {
    client
        .put_object()
        .bucket(BUCKET)
        .key(key)
        .body(ByteStream::from(bytes))
        .send()
        .await
        .unwrap_or_else(|e| panic!("put {key}: {}", aws_sdk_s3::error::DisplayErrorContext(e)));
}

/// Pseudo-random bytes, so that parts differ and a misplaced byte shows.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[tokio::test]
async fn buckets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s3 = start(dir.path()).await;
    let client = client(&s3);

    client
        .head_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("configured bucket exists");
    client
        .create_bucket()
        .bucket("other-bucket")
        .send()
        .await
        .expect("create");
    let again = client
        .create_bucket()
        .bucket("other-bucket")
        .send()
        .await
        .expect_err("exists");
    assert_eq!(code(&again).as_deref(), Some("BucketAlreadyOwnedByYou"));
    let names: Vec<String> = client
        .list_buckets()
        .send()
        .await
        .expect("list buckets")
        .buckets()
        .iter()
        .filter_map(|b| b.name().map(str::to_string))
        .collect();
    assert_eq!(names, [BUCKET, "other-bucket"]);

    let missing = client
        .head_bucket()
        .bucket("no-such-bucket")
        .send()
        .await
        .expect_err("404");
    assert_eq!(status(&missing), Some(404));
    let missing = client
        .get_object()
        .bucket("no-such-bucket")
        .key("k")
        .send()
        .await
        .expect_err("404");
    assert_eq!(code(&missing).as_deref(), Some("NoSuchBucket"));
    let invalid = client
        .create_bucket()
        .bucket("Bad_Name")
        .send()
        .await
        .expect_err("400");
    assert_eq!(status(&invalid), Some(400));

    put_bytes(&client, "k", b"x".to_vec()).await;
    let not_empty = client
        .delete_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect_err("not empty");
    assert_eq!(code(&not_empty).as_deref(), Some("BucketNotEmpty"));
    client
        .delete_bucket()
        .bucket("other-bucket")
        .send()
        .await
        .expect("delete empty bucket");
    let location = client
        .get_bucket_location()
        .bucket(BUCKET)
        .send()
        .await
        .expect("location");
    assert!(
        location
            .location_constraint()
            .is_none_or(|c| c.as_str().is_empty())
    );
    s3.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn objects_with_the_default_client() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s3 = start(dir.path()).await;
    let client = client(&s3);

    // In memory: the SDK signs the payload and sends a CRC32 header.
    let put = client
        .put_object()
        .bucket(BUCKET)
        .key("dir/hello.json")
        .content_type("application/json")
        .metadata("origin", "test")
        .body(ByteStream::from_static(b"{\"hello\":\"world\"}"))
        .send()
        .await
        .expect("put");
    // hex MD5 in quotes, as S3.
    assert_eq!(put.e_tag(), Some("\"fbc24bcc7a1794758fc1327fcfebdaf6\""));
    assert!(put.checksum_crc32().is_some());

    let head = client
        .head_object()
        .bucket(BUCKET)
        .key("dir/hello.json")
        .send()
        .await
        .expect("head");
    assert_eq!(head.content_length(), Some(17));
    assert_eq!(head.content_type(), Some("application/json"));
    assert_eq!(head.e_tag(), put.e_tag());
    assert_eq!(
        head.metadata()
            .and_then(|m| m.get("origin"))
            .map(String::as_str),
        Some("test")
    );

    // The SDK asks for the checksum and verifies it.
    let got = client
        .get_object()
        .bucket(BUCKET)
        .key("dir/hello.json")
        .checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled)
        .send()
        .await
        .expect("get");
    assert_eq!(got.checksum_crc32(), put.checksum_crc32());
    assert_eq!(
        got.body.collect().await.expect("body").to_vec(),
        b"{\"hello\":\"world\"}"
    );

    // From a file: the SDK streams it aws-chunked with a checksum trailer.
    let file = dir.path().join("upload.bin");
    let content = pattern(300_000, 1);
    tokio::fs::write(&file, &content).await.expect("write");
    client
        .put_object()
        .bucket(BUCKET)
        .key("streamed.bin")
        .body(ByteStream::from_path(&file).await.expect("bytestream"))
        .send()
        .await
        .expect("streamed put");
    assert_eq!(get_bytes(&client, "streamed.bin").await, content);

    // Ranges.
    let range = |r: &'static str| {
        let client = client.clone();
        async move {
            let out = client
                .get_object()
                .bucket(BUCKET)
                .key("streamed.bin")
                .range(r)
                .send()
                .await
                .expect("range get");
            let content_range = out.content_range().map(str::to_string);
            (
                content_range,
                out.body.collect().await.expect("body").to_vec(),
            )
        }
    };
    let (cr, bytes) = range("bytes=10-19").await;
    assert_eq!(cr.as_deref(), Some("bytes 10-19/300000"));
    assert_eq!(bytes, &content[10..20]);
    let (_, bytes) = range("bytes=299990-").await;
    assert_eq!(bytes, &content[299_990..]);
    let (_, bytes) = range("bytes=-5").await;
    assert_eq!(bytes, &content[299_995..]);
    let unsatisfiable = client
        .get_object()
        .bucket(BUCKET)
        .key("streamed.bin")
        .range("bytes=400000-")
        .send()
        .await
        .expect_err("416");
    assert_eq!(status(&unsatisfiable), Some(416));
    assert_eq!(code(&unsatisfiable).as_deref(), Some("InvalidRange"));

    // Missing keys.
    let missing = client
        .get_object()
        .bucket(BUCKET)
        .key("nope")
        .send()
        .await
        .expect_err("404");
    assert!(
        missing
            .as_service_error()
            .is_some_and(|e| e.is_no_such_key())
    );
    let missing = client
        .head_object()
        .bucket(BUCKET)
        .key("nope")
        .send()
        .await
        .expect_err("404");
    assert!(missing.as_service_error().is_some_and(|e| e.is_not_found()));

    // Overwrite, copy, delete.
    put_bytes(&client, "dir/hello.json", b"second".to_vec()).await;
    assert_eq!(get_bytes(&client, "dir/hello.json").await, b"second");
    let copy = client
        .copy_object()
        .bucket(BUCKET)
        .key("copied/hello.json")
        .copy_source(format!("{BUCKET}/dir/hello.json"))
        .send()
        .await
        .expect("copy");
    assert_eq!(
        copy.copy_object_result().and_then(|r| r.e_tag()),
        Some("\"a9f0e61a137d86aa9db53465e0801612\"")
    );
    assert_eq!(get_bytes(&client, "copied/hello.json").await, b"second");
    client
        .delete_object()
        .bucket(BUCKET)
        .key("dir/hello.json")
        .send()
        .await
        .expect("delete");
    client
        .delete_object()
        .bucket(BUCKET)
        .key("dir/hello.json")
        .send()
        .await
        .expect("deleting a missing key succeeds, as in S3");
    assert!(
        !dir.path().join(BUCKET).join("dir").exists(),
        "empty folders are pruned"
    );

    // Conditional create.
    let first = client
        .put_object()
        .bucket(BUCKET)
        .key("lock")
        .if_none_match("*")
        .body(ByteStream::from_static(b"1"))
        .send()
        .await;
    assert!(first.is_ok());
    let second = client
        .put_object()
        .bucket(BUCKET)
        .key("lock")
        .if_none_match("*")
        .body(ByteStream::from_static(b"2"))
        .send()
        .await
        .expect_err("412");
    assert_eq!(status(&second), Some(412));
    assert_eq!(get_bytes(&client, "lock").await, b"1");

    // Empty objects.
    put_bytes(&client, "empty", Vec::new()).await;
    assert_eq!(get_bytes(&client, "empty").await, b"");
    s3.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn listings_with_delimiter_and_pagination() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s3 = start(dir.path()).await;
    let client = client(&s3);
    let keys = [
        "index-0",
        "index.latest",
        "indices/a/0/__1",
        "indices/a/0/__2",
        "indices/b/meta-1.dat",
        "snap-1.dat",
        "snap-2.dat",
        "with space+plus&amp.txt",
    ];
    for key in keys {
        put_bytes(&client, key, key.as_bytes().to_vec()).await;
    }

    // Everything, two at a time.
    let mut all = Vec::new();
    let mut token = None;
    let mut pages = 0;
    loop {
        let page = client
            .list_objects_v2()
            .bucket(BUCKET)
            .max_keys(2)
            .set_continuation_token(token)
            .send()
            .await
            .expect("list");
        pages += 1;
        all.extend(
            page.contents()
                .iter()
                .filter_map(|o| o.key().map(str::to_string)),
        );
        assert!(page.key_count().unwrap_or(0) <= 2);
        if page.is_truncated() != Some(true) {
            break;
        }
        token = page.next_continuation_token().map(str::to_string);
    }
    assert_eq!(all, keys);
    assert_eq!(pages, 4);

    // One level, with common prefixes.
    let top = client
        .list_objects_v2()
        .bucket(BUCKET)
        .delimiter("/")
        .send()
        .await
        .expect("list");
    let prefixes: Vec<_> = top
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix())
        .collect();
    assert_eq!(prefixes, ["indices/"]);
    assert_eq!(top.contents().len(), 5);
    let objects = top
        .contents()
        .iter()
        .find(|o| o.key() == Some("snap-1.dat"))
        .expect("listed");
    assert_eq!(objects.size(), Some(10));
    assert_eq!(objects.e_tag().map(|e| e.len()), Some(34));

    let indices = client
        .list_objects_v2()
        .bucket(BUCKET)
        .prefix("indices/")
        .delimiter("/")
        .max_keys(1)
        .send()
        .await
        .expect("list");
    let prefixes: Vec<_> = indices
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix())
        .collect();
    assert_eq!(prefixes, ["indices/a/"]);
    assert_eq!(indices.is_truncated(), Some(true));
    let rest = client
        .list_objects_v2()
        .bucket(BUCKET)
        .prefix("indices/")
        .delimiter("/")
        .set_continuation_token(indices.next_continuation_token().map(str::to_string))
        .send()
        .await
        .expect("list");
    let prefixes: Vec<_> = rest
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix())
        .collect();
    assert_eq!(prefixes, ["indices/b/"]);
    assert_eq!(rest.is_truncated(), Some(false));

    let after = client
        .list_objects_v2()
        .bucket(BUCKET)
        .start_after("snap-1.dat")
        .send()
        .await
        .expect("list");
    let keys_after: Vec<_> = after.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys_after, ["snap-2.dat", "with space+plus&amp.txt"]);

    let by_prefix = client
        .list_objects_v2()
        .bucket(BUCKET)
        .prefix("snap-")
        .send()
        .await
        .expect("list");
    assert_eq!(by_prefix.key_count(), Some(2));

    // A prefix that points outside the bucket lists nothing.
    let outside = client
        .list_objects_v2()
        .bucket(BUCKET)
        .prefix("../")
        .send()
        .await
        .expect("list");
    assert_eq!(outside.key_count(), Some(0));

    // ListObjects (v1), as older clients use.
    let v1 = client
        .list_objects()
        .bucket(BUCKET)
        .marker("index.latest")
        .delimiter("/")
        .max_keys(2)
        .send()
        .await
        .expect("list v1");
    let prefixes: Vec<_> = v1
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix())
        .collect();
    let v1_keys: Vec<_> = v1.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(prefixes, ["indices/"]);
    assert_eq!(v1_keys, ["snap-1.dat"]);
    assert_eq!(v1.is_truncated(), Some(true));
    assert_eq!(v1.next_marker(), Some("snap-1.dat"));

    // Multi-object delete.
    let delete = Delete::builder()
        .objects(
            ObjectIdentifier::builder()
                .key("snap-1.dat")
                .build()
                .expect("id"),
        )
        .objects(
            ObjectIdentifier::builder()
                .key("snap-2.dat")
                .build()
                .expect("id"),
        )
        .objects(
            ObjectIdentifier::builder()
                .key("never-was")
                .build()
                .expect("id"),
        )
        .objects(
            ObjectIdentifier::builder()
                .key("../escape")
                .build()
                .expect("id"),
        )
        .build()
        .expect("delete");
    let deleted = client
        .delete_objects()
        .bucket(BUCKET)
        .delete(delete)
        .send()
        .await
        .expect("delete objects");
    let gone: Vec<_> = deleted.deleted().iter().filter_map(|d| d.key()).collect();
    assert_eq!(gone, ["snap-1.dat", "snap-2.dat", "never-was"]);
    let errors: Vec<_> = deleted.errors().iter().filter_map(|e| e.key()).collect();
    assert_eq!(errors, ["../escape"]);
    let left = client
        .list_objects_v2()
        .bucket(BUCKET)
        .prefix("snap")
        .send()
        .await
        .expect("list");
    assert_eq!(left.key_count(), Some(0));
    s3.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn multipart_upload_of_10_mib() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s3 = start(dir.path()).await;
    let client = client(&s3);
    const MIB: usize = 1024 * 1024;
    let content = pattern(10 * MIB, 7);
    let started = Instant::now();
    let upload = client
        .create_multipart_upload()
        .bucket(BUCKET)
        .key("big/blob")
        .content_type("application/octet-stream")
        .send()
        .await
        .expect("create upload");
    let upload_id = upload.upload_id().expect("upload id").to_string();
    let mut completed = Vec::new();
    // 5 MiB, 4 MiB, 1 MiB: all but the last meet S3's 5 MiB minimum...
    // except the second, which the first attempt uses to check the rule.
    let chunks = [
        &content[..5 * MIB],
        &content[5 * MIB..9 * MIB],
        &content[9 * MIB..],
    ];
    for (i, chunk) in chunks.iter().enumerate() {
        let number = i as i32 + 1;
        let part = client
            .upload_part()
            .bucket(BUCKET)
            .key("big/blob")
            .upload_id(&upload_id)
            .part_number(number)
            .body(ByteStream::from(chunk.to_vec()))
            .send()
            .await
            .expect("upload part");
        completed.push(
            CompletedPart::builder()
                .part_number(number)
                .e_tag(part.e_tag().expect("etag"))
                .build(),
        );
    }
    let complete = |parts: Vec<CompletedPart>| {
        client
            .complete_multipart_upload()
            .bucket(BUCKET)
            .key("big/blob")
            .upload_id(&upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
    };
    let too_small = complete(completed.clone())
        .await
        .expect_err("part 2 is under 5 MiB");
    assert_eq!(code(&too_small).as_deref(), Some("EntityTooSmall"));
    let wrong_etag = complete(vec![
        completed[0].clone(),
        CompletedPart::builder()
            .part_number(3)
            .e_tag("\"00\"")
            .build(),
    ])
    .await
    .expect_err("wrong etag");
    assert_eq!(code(&wrong_etag).as_deref(), Some("InvalidPart"));
    let out_of_order = complete(vec![completed[2].clone(), completed[0].clone()])
        .await
        .expect_err("order");
    assert_eq!(code(&out_of_order).as_deref(), Some("InvalidPartOrder"));

    // Re-upload part 2 as the remaining 5 MiB and complete with two parts.
    let part = client
        .upload_part()
        .bucket(BUCKET)
        .key("big/blob")
        .upload_id(&upload_id)
        .part_number(2)
        .body(ByteStream::from(content[5 * MIB..].to_vec()))
        .send()
        .await
        .expect("upload part");
    let parts = vec![
        completed[0].clone(),
        CompletedPart::builder()
            .part_number(2)
            .e_tag(part.e_tag().expect("etag"))
            .build(),
    ];
    let done = complete(parts).await.expect("complete");
    let etag = done.e_tag().expect("etag").to_string();
    assert!(etag.ends_with("-2\""), "{etag}");
    let put_time = started.elapsed();

    let started = Instant::now();
    let got = get_bytes(&client, "big/blob").await;
    let get_time = started.elapsed();
    assert_eq!(got.len(), content.len());
    assert!(got == content, "the object is the parts in order");
    let head = client
        .head_object()
        .bucket(BUCKET)
        .key("big/blob")
        .send()
        .await
        .expect("head");
    assert_eq!(head.e_tag(), Some(etag.as_str()));
    assert_eq!(head.content_type(), Some("application/octet-stream"));
    eprintln!(
        "multipart 10 MiB (with 3 failed completes and an extra part): put {:.0} MB/s, get {:.0} MB/s",
        10.0 * 1.048_576 / put_time.as_secs_f64(),
        10.0 * 1.048_576 / get_time.as_secs_f64()
    );

    // The upload is gone once completed; an aborted one too.
    let again = complete(vec![completed[0].clone()])
        .await
        .expect_err("completed");
    assert_eq!(code(&again).as_deref(), Some("NoSuchUpload"));
    let other = client
        .create_multipart_upload()
        .bucket(BUCKET)
        .key("aborted")
        .send()
        .await
        .expect("create");
    client
        .abort_multipart_upload()
        .bucket(BUCKET)
        .key("aborted")
        .upload_id(other.upload_id().expect("id"))
        .send()
        .await
        .expect("abort");
    let gone = client
        .upload_part()
        .bucket(BUCKET)
        .key("aborted")
        .upload_id(other.upload_id().expect("id"))
        .part_number(1)
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .expect_err("aborted");
    assert_eq!(code(&gone).as_deref(), Some("NoSuchUpload"));
    let forged = client
        .upload_part()
        .bucket(BUCKET)
        .key("aborted")
        .upload_id("../../../../etc")
        .part_number(1)
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .expect_err("not an upload id");
    assert_eq!(code(&forged).as_deref(), Some("NoSuchUpload"));
    s3.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn single_put_and_get_of_10_mib() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s3 = start(dir.path()).await;
    let client = client(&s3);
    let content = pattern(10 * 1024 * 1024, 3);
    let started = Instant::now();
    put_bytes(&client, "ten", content.clone()).await;
    let put_time = started.elapsed();
    let started = Instant::now();
    let got = get_bytes(&client, "ten").await;
    let get_time = started.elapsed();
    assert!(got == content);
    eprintln!(
        "single 10 MiB: put {:.0} MB/s, get {:.0} MB/s",
        10.485_76 / put_time.as_secs_f64(),
        10.485_76 / get_time.as_secs_f64()
    );
    s3.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn wrong_credentials_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s3 = start(dir.path()).await;

    let wrong_key = client_with(&s3, "AKIAWRONGKEY", SECRET_KEY);
    let error = wrong_key.list_buckets().send().await.expect_err("refused");
    assert_eq!(status(&error), Some(403));
    assert_eq!(code(&error).as_deref(), Some("InvalidAccessKeyId"));
    let error = wrong_key
        .put_object()
        .bucket(BUCKET)
        .key("k")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .expect_err("refused");
    assert_eq!(code(&error).as_deref(), Some("InvalidAccessKeyId"));

    let wrong_secret = client_with(&s3, ACCESS_KEY, "not-the-secret");
    let error = wrong_secret
        .get_object()
        .bucket(BUCKET)
        .key("k")
        .send()
        .await
        .expect_err("refused");
    assert_eq!(status(&error), Some(403));
    assert_eq!(code(&error).as_deref(), Some("SignatureDoesNotMatch"));
    let error = wrong_secret
        .put_object()
        .bucket(BUCKET)
        .key("k")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .expect_err("refused");
    assert_eq!(code(&error).as_deref(), Some("SignatureDoesNotMatch"));
    assert!(!dir.path().join(BUCKET).join("k").exists());

    // No signature at all.
    let (status_line, body) = raw_request(&s3, "GET /floe-snapshots/k HTTP/1.1\r\n\r\n").await;
    assert!(status_line.contains(" 403 "), "{status_line}");
    assert!(body.contains("<Code>AccessDenied</Code>"), "{body}");
    s3.shutdown().await.expect("shutdown");
}

/// Sends `request` (its Host header added) on a plain connection and
/// returns the status line and the body.
async fn raw_request(s3: &RunningS3, request: &str) -> (String, String) {
    let mut stream = tokio::net::TcpStream::connect(s3.addr())
        .await
        .expect("connect");
    let (line, rest) = request.split_once("\r\n").expect("request line");
    let full = format!(
        "{line}\r\nHost: {}\r\nConnection: close\r\n{rest}",
        s3.addr()
    );
    stream.write_all(full.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

#[tokio::test]
async fn keys_cannot_escape_the_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root");
    let s3 = start(&root).await;
    let client = client(&s3);
    for key in [
        "../escaped",
        "a/../../escaped",
        "../../escaped",
        "/abs",
        "a//b",
        "trailing/",
    ] {
        let error = client
            .put_object()
            .bucket(BUCKET)
            .key(key)
            .body(ByteStream::from_static(b"x"))
            .send()
            .await
            .expect_err(key);
        assert_eq!(status(&error), Some(400), "{key}");
        let error = client
            .get_object()
            .bucket(BUCKET)
            .key(key)
            .send()
            .await
            .expect_err(key);
        assert_eq!(status(&error), Some(400), "{key}");
    }
    assert!(!dir.path().join("escaped").exists());
    assert!(!root.join("escaped").exists());
    // Bucket names are checked too ("..", the state folder).
    let error = client
        .put_object()
        .bucket(".floe-s3")
        .key("x")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .expect_err("not a bucket");
    assert_eq!(status(&error), Some(400));
    s3.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn objects_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s3 = start(dir.path()).await;
    let client = client(&s3);
    put_bytes(&client, "indices/x/0/__blob", pattern(1000, 9)).await;
    let etag = client
        .head_object()
        .bucket(BUCKET)
        .key("indices/x/0/__blob")
        .send()
        .await
        .expect("head")
        .e_tag()
        .map(str::to_string);
    s3.shutdown().await.expect("shutdown");

    // A file left in tmp/ by a crash is cleaned up at start.
    let leftover = dir.path().join(".floe-s3/tmp/half-written");
    tokio::fs::write(&leftover, b"half").await.expect("write");
    // A file copied into the bucket by hand is served, its ETag computed.
    tokio::fs::write(dir.path().join(BUCKET).join("by-hand.txt"), b"hand")
        .await
        .expect("write");

    let s3 = start(dir.path()).await;
    assert!(!leftover.exists());
    let client = self::client(&s3);
    assert_eq!(
        get_bytes(&client, "indices/x/0/__blob").await,
        pattern(1000, 9)
    );
    let head = client
        .head_object()
        .bucket(BUCKET)
        .key("indices/x/0/__blob")
        .send()
        .await
        .expect("head");
    assert_eq!(head.e_tag().map(str::to_string), etag);
    let by_hand = client
        .head_object()
        .bucket(BUCKET)
        .key("by-hand.txt")
        .send()
        .await
        .expect("head");
    assert_eq!(
        by_hand.e_tag(),
        Some("\"573ce5969e9884d49d4fab77b09a306a\"")
    );

    // Dropping the handle stops the server: the port stops answering.
    let addr = s3.addr();
    drop(s3);
    let mut refused = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(refused, "{addr} still accepts connections after drop");
}

#[tokio::test]
async fn presigned_urls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s3 = start(dir.path()).await;
    let client = client(&s3);
    put_bytes(&client, "shared/file.txt", b"presigned body".to_vec()).await;
    let presigned = client
        .get_object()
        .bucket(BUCKET)
        .key("shared/file.txt")
        .presigned(
            aws_sdk_s3::presigning::PresigningConfig::expires_in(std::time::Duration::from_secs(
                60,
            ))
            .expect("config"),
        )
        .await
        .expect("presign");
    let uri: http::Uri = presigned.uri().parse().expect("uri");
    let path = uri.path_and_query().expect("path").as_str();
    let (status_line, body) = raw_request(&s3, &format!("GET {path} HTTP/1.1\r\n\r\n")).await;
    assert!(status_line.contains(" 200 "), "{status_line}: {body}");
    assert_eq!(body, "presigned body");
    let tampered = path.replace("file.txt", "other.txt");
    let (status_line, body) = raw_request(&s3, &format!("GET {tampered} HTTP/1.1\r\n\r\n")).await;
    assert!(status_line.contains(" 403 "), "{status_line}");
    assert!(body.contains("SignatureDoesNotMatch"), "{body}");
    s3.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn only_loopback_and_valid_configuration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LocalS3Config::new(dir.path(), credentials())
        .with_listen("0.0.0.0:0".parse().expect("addr"));
    assert!(matches!(
        LocalS3::start(config).await,
        Err(S3LocalError::NotLoopback(_))
    ));
    let config = LocalS3Config::new(dir.path(), credentials()).with_bucket("Not_Valid");
    assert!(matches!(
        LocalS3::start(config).await,
        Err(S3LocalError::InvalidBucketName { .. })
    ));
    let config = LocalS3Config::new(dir.path(), Credentials::new("id", ""));
    assert!(matches!(
        LocalS3::start(config).await,
        Err(S3LocalError::EmptyCredentials)
    ));
    let v6 =
        LocalS3Config::new(dir.path(), credentials()).with_listen("[::1]:0".parse().expect("addr"));
    // ::1 is loopback too, where the machine has IPv6.
    if let Ok(s3) = LocalS3::start(v6).await {
        assert!(s3.addr().ip().is_loopback());
    }
}
