use std::time::{Duration, Instant};

use floe_auth::{ConfigError, fetch_jwks};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::common::{fixture, good_claims, jwks_verifier_for, rs256};

/// Serves exactly one HTTP request with `status` and `body`, by hand, and
/// returns the request head it received.
async fn serve_once(
    status: &'static str,
    body: Vec<u8>,
    content_length: bool,
) -> (String, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("accept");
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.expect("read");
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let mut response =
            format!("HTTP/1.1 {status}\r\nContent-Type: application/json\r\nConnection: close\r\n");
        if content_length {
            response.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        response.push_str("\r\n");
        // The client may hang up early (that is what the size cap does), so
        // write errors are expected in some tests.
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.write_all(&body).await;
        let _ = stream.shutdown().await;
        String::from_utf8_lossy(&head).into_owned()
    });
    (format!("http://{addr}/.well-known/jwks.json"), server)
}

#[tokio::test]
async fn fetches_from_a_loopback_server() {
    let body = std::fs::read(fixture("test-only-jwks.json")).expect("fixture");
    let (url, server) = serve_once("200 OK", body, true).await;
    let set = fetch_jwks(&url).await.expect("fetch works");
    let head = server.await.expect("server task");
    assert!(
        head.starts_with("GET /.well-known/jwks.json HTTP/1.1\r\n"),
        "{head}"
    );
    assert_eq!(set.keys.len(), 2);
    // The fetched keys are the real thing.
    let verifier = jwks_verifier_for(set);
    assert!(
        verifier
            .verify(&rs256(Some("test-rsa"), &good_claims()))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn http_to_a_remote_host_is_refused_without_connecting() {
    // Linux routes 0.0.0.0 to this machine, so had the fetch connected, the
    // listener below would have seen it. 0.0.0.0 is not a loopback address.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("local addr").port();
    let started = Instant::now();
    let result = fetch_jwks(&format!("http://0.0.0.0:{port}/jwks")).await;
    assert!(
        matches!(result, Err(ConfigError::InsecureUrl(_))),
        "{result:?}"
    );
    let accepted = tokio::time::timeout(Duration::from_millis(300), listener.accept()).await;
    assert!(accepted.is_err(), "a connection was attempted");

    for url in [
        "http://issuer.example.com/.well-known/jwks.json",
        "http://192.0.2.1/jwks",
        "http://169.254.169.254/latest/meta-data",
    ] {
        let result = fetch_jwks(url).await;
        assert!(
            matches!(result, Err(ConfigError::InsecureUrl(_))),
            "{url}: {result:?}"
        );
    }
    // Refused before any DNS lookup or connect, so well under the timeout.
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn error_statuses_are_reported() {
    let (url, server) = serve_once("503 Service Unavailable", b"{}".to_vec(), true).await;
    let result = fetch_jwks(&url).await;
    assert!(
        matches!(result, Err(ConfigError::HttpStatus { status: 503, .. })),
        "{result:?}"
    );
    server.await.expect("server task");
}

#[tokio::test]
async fn oversized_bodies_are_refused() {
    let big = vec![b' '; 1024 * 1024 + 1];
    let (url, server) = serve_once("200 OK", big.clone(), true).await;
    let result = fetch_jwks(&url).await;
    assert!(
        matches!(result, Err(ConfigError::TooLarge { .. })),
        "{result:?}"
    );
    server.await.expect("server task");

    // Without a Content-Length the cap is enforced while reading.
    let (url, server) = serve_once("200 OK", big, false).await;
    let result = fetch_jwks(&url).await;
    assert!(
        matches!(result, Err(ConfigError::TooLarge { .. })),
        "{result:?}"
    );
    server.await.expect("server task");
}

#[tokio::test]
async fn invalid_documents_are_reported() {
    let (url, server) = serve_once("200 OK", b"<html>login</html>".to_vec(), true).await;
    let result = fetch_jwks(&url).await;
    assert!(
        matches!(result, Err(ConfigError::InvalidJwks(_))),
        "{result:?}"
    );
    server.await.expect("server task");
}
