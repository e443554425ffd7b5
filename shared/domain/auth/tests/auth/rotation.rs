//! A JWKS URL's keys as the provider changes them: rotation, expiry, the
//! provider going down or answering garbage, keys being dropped.
//!
//! The provider is an axum server on 127.0.0.1 whose answer a test sets and
//! which counts the requests it serves; the cache's clock is the test's, so
//! no test sleeps or times anything.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use floe_auth::{
    AuthError, Clock, ConfigError, JwksCache, JwksCacheSettings, KeySource, Verifier,
    VerifierConfig,
};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use crate::common::{AUDIENCE, ISSUER, good_claims, read_fixture, rs256};

const TTL: Duration = Duration::from_secs(600);
const INTERVAL: Duration = Duration::from_secs(30);
const SETTINGS: JwksCacheSettings = JwksCacheSettings {
    default_ttl: TTL,
    refetch_interval: INTERVAL,
};

/// What the provider answers.
#[derive(Clone)]
enum Answer {
    Keys {
        body: String,
        cache_control: Option<&'static str>,
    },
    Status(StatusCode),
    Body(&'static str),
}

struct Shared {
    answer: Mutex<Answer>,
    served: AtomicUsize,
}

/// A test identity provider that can be changed, stopped and started again
/// at the same address.
struct Provider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    running: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl Provider {
    async fn start(answer: Answer) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            answer: Mutex::new(answer),
            served: AtomicUsize::new(0),
        });
        let mut provider = Provider {
            addr,
            shared,
            running: None,
        };
        provider.serve(listener);
        provider
    }

    fn serve(&mut self, listener: TcpListener) {
        let app = axum::Router::new()
            .route("/jwks.json", axum::routing::get(answer))
            .with_state(Arc::clone(&self.shared));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        self.running = Some((stop, task));
    }

    fn url(&self) -> String {
        format!("http://{}/jwks.json", self.addr)
    }

    fn set(&self, answer: Answer) {
        *self.shared.answer.lock().expect("answer lock") = answer;
    }

    /// Requests answered so far.
    fn served(&self) -> usize {
        self.shared.served.load(Ordering::SeqCst)
    }

    /// Closes the port: connections are refused from now on.
    async fn stop(&mut self) {
        if let Some((stop, task)) = self.running.take() {
            let _ = stop.send(());
            task.await.expect("server task");
        }
    }

    async fn restart(&mut self) {
        let listener = TcpListener::bind(self.addr).await.expect("rebind");
        self.serve(listener);
    }
}

async fn answer(State(shared): State<Arc<Shared>>) -> Response {
    shared.served.fetch_add(1, Ordering::SeqCst);
    let answer = shared.answer.lock().expect("answer lock").clone();
    let mut response = match answer {
        Answer::Keys {
            body,
            cache_control,
        } => {
            let mut response = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
            if let Some(value) = cache_control {
                response
                    .headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static(value));
            }
            response
        }
        Answer::Status(status) => (status, "{}").into_response(),
        Answer::Body(text) => text.into_response(),
    };
    // Each fetch on its own connection, so stopping the server is final.
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The fixture's RSA public key published under each of `kids`: tokens
/// signed with the fixture's private key and one of those kids verify.
fn keys(kids: &[&str]) -> Answer {
    keys_with(kids, None)
}

fn keys_with(kids: &[&str], cache_control: Option<&'static str>) -> Answer {
    let fixture: Value =
        serde_json::from_slice(&read_fixture("test-only-jwks.json")).expect("fixture JWKS");
    let rsa = fixture["keys"]
        .as_array()
        .and_then(|keys| keys.iter().find(|k| k["kty"] == "RSA"))
        .expect("the fixture has an RSA key")
        .clone();
    let published: Vec<Value> = kids
        .iter()
        .map(|kid| {
            let mut key = rsa.clone();
            key["kid"] = json!(kid);
            key
        })
        .collect();
    Answer::Keys {
        body: json!({ "keys": published }).to_string(),
        cache_control,
    }
}

/// A clock that moves only when told.
struct TestClock {
    start: Instant,
    elapsed_ms: AtomicU64,
}

impl TestClock {
    fn new() -> Arc<TestClock> {
        Arc::new(TestClock {
            start: Instant::now(),
            elapsed_ms: AtomicU64::new(0),
        })
    }

    fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).expect("a test step fits in u64 ms");
        self.elapsed_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now(&self) -> Instant {
        self.start + Duration::from_millis(self.elapsed_ms.load(Ordering::SeqCst))
    }
}

async fn verifier(provider: &Provider, clock: &Arc<TestClock>) -> Arc<Verifier> {
    let cache = JwksCache::connect_with_clock(&provider.url(), SETTINGS, clock.clone())
        .await
        .expect("the first fetch works");
    Arc::new(
        Verifier::new(VerifierConfig {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            keys: KeySource::Remote(cache),
            leeway_secs: 0,
        })
        .expect("verifier builds"),
    )
}

fn token(kid: &str) -> String {
    rs256(Some(kid), &good_claims())
}

async fn check(verifier: &Verifier, kid: &str) -> Result<(), AuthError> {
    verifier.verify(&token(kid)).await.map(|_| ())
}

/// Verifies one token per kid, all at once, and returns their results.
async fn all_at_once(verifier: &Arc<Verifier>, kids: &[String]) -> Vec<Result<(), AuthError>> {
    let mut tasks = JoinSet::new();
    for kid in kids {
        let verifier = Arc::clone(verifier);
        let token = token(kid);
        tasks.spawn(async move { verifier.verify(&token).await.map(|_| ()) });
    }
    tasks.join_all().await
}

#[tokio::test]
async fn a_rotated_in_key_is_accepted_after_a_refetch() {
    let provider = Provider::start(keys(&["k1"])).await;
    let clock = TestClock::new();
    let verifier = verifier(&provider, &clock).await;
    assert_eq!(provider.served(), 1);
    assert_eq!(check(&verifier, "k1").await, Ok(()));

    // The provider rotates: k2 is published and signs from now on.
    provider.set(keys(&["k1", "k2"]));
    clock.advance(INTERVAL);
    assert_eq!(check(&verifier, "k2").await, Ok(()));
    assert_eq!(provider.served(), 2);
    // Known now: no further fetch.
    assert_eq!(check(&verifier, "k2").await, Ok(()));
    assert_eq!(check(&verifier, "k1").await, Ok(()));
    assert_eq!(provider.served(), 2);

    // Many requests with the next key at once share one fetch.
    provider.set(keys(&["k2", "k3"]));
    clock.advance(INTERVAL);
    let kids = vec!["k3".to_owned(); 16];
    let results = all_at_once(&verifier, &kids).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(provider.served(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_kids_cost_at_most_one_fetch_per_interval() {
    let provider = Provider::start(keys(&["k1"])).await;
    let clock = TestClock::new();
    let verifier = verifier(&provider, &clock).await;
    let made_up =
        |round: usize| -> Vec<String> { (0..16).map(|i| format!("made-up-{round}-{i}")).collect() };

    // Right after the start-up fetch the provider was just asked.
    let results = all_at_once(&verifier, &made_up(0)).await;
    assert!(
        results.iter().all(|r| r == &Err(AuthError::UnknownKey)),
        "{results:?}"
    );
    assert_eq!(provider.served(), 1);

    // An interval later, a burst of unknown kids asks once between them.
    clock.advance(INTERVAL);
    let results = all_at_once(&verifier, &made_up(1)).await;
    assert!(
        results.iter().all(|r| r == &Err(AuthError::UnknownKey)),
        "{results:?}"
    );
    assert_eq!(provider.served(), 2);

    // Within the interval, not again…
    clock.advance(INTERVAL - Duration::from_secs(1));
    all_at_once(&verifier, &made_up(2)).await;
    assert_eq!(provider.served(), 2);
    // …and once more when it has passed.
    clock.advance(Duration::from_secs(1));
    all_at_once(&verifier, &made_up(3)).await;
    assert_eq!(provider.served(), 3);

    // The known key never waited for any of it.
    assert_eq!(check(&verifier, "k1").await, Ok(()));
    assert_eq!(provider.served(), 3);
}

#[tokio::test]
async fn an_expired_set_is_fetched_again() {
    // No max-age: the configured lifetime.
    let provider = Provider::start(keys(&["k1"])).await;
    let clock = TestClock::new();
    let verifier = verifier(&provider, &clock).await;
    clock.advance(TTL - Duration::from_secs(1));
    assert_eq!(check(&verifier, "k1").await, Ok(()));
    assert_eq!(provider.served(), 1);
    clock.advance(Duration::from_secs(1));
    assert_eq!(check(&verifier, "k1").await, Ok(()));
    assert_eq!(provider.served(), 2);
    // A fresh lifetime starts with that fetch.
    clock.advance(TTL - Duration::from_secs(1));
    assert_eq!(check(&verifier, "k1").await, Ok(()));
    assert_eq!(provider.served(), 2);
}

#[tokio::test]
async fn the_providers_max_age_sets_the_lifetime_within_bounds() {
    let cases = [
        // Honoured as given.
        (Some("public, max-age=120"), Duration::from_secs(120)),
        // Raised to the minimum, or each request would fetch.
        (Some("max-age=0"), JwksCacheSettings::MIN_TTL),
        (Some("no-store"), JwksCacheSettings::MIN_TTL),
        // Lowered to the maximum.
        (Some("max-age=31536000"), JwksCacheSettings::MAX_TTL),
        // Not a number: the configured lifetime.
        (Some("max-age=soon"), TTL),
    ];
    for (cache_control, lifetime) in cases {
        let provider = Provider::start(keys_with(&["k1"], cache_control)).await;
        let clock = TestClock::new();
        let verifier = verifier(&provider, &clock).await;
        clock.advance(lifetime - Duration::from_secs(1));
        assert_eq!(check(&verifier, "k1").await, Ok(()));
        assert_eq!(provider.served(), 1, "{cache_control:?}: fetched early");
        clock.advance(Duration::from_secs(1));
        assert_eq!(check(&verifier, "k1").await, Ok(()));
        assert_eq!(provider.served(), 2, "{cache_control:?}: not fetched");
    }
}

#[tokio::test]
async fn a_provider_that_is_down_leaves_the_known_keys_working() {
    let mut provider = Provider::start(keys(&["k1"])).await;
    let clock = TestClock::new();
    let verifier = verifier(&provider, &clock).await;
    provider.stop().await;

    // Expired, and the provider refuses connections: the known key still
    // verifies, and a key it cannot look for is refused with its own code.
    clock.advance(TTL);
    assert_eq!(check(&verifier, "k1").await, Ok(()));
    let refused = check(&verifier, "k2").await;
    assert_eq!(refused, Err(AuthError::KeysUnavailable));
    assert_eq!(
        refused.err().map(|e| e.code().name()),
        Some("auth.keys_unavailable")
    );
    clock.advance(INTERVAL);
    assert_eq!(
        check(&verifier, "k2").await,
        Err(AuthError::KeysUnavailable)
    );
    assert_eq!(check(&verifier, "k1").await, Ok(()));

    // Back, with a new key: it is found, without a restart.
    provider.set(keys(&["k1", "k2"]));
    provider.restart().await;
    clock.advance(INTERVAL);
    assert_eq!(check(&verifier, "k2").await, Ok(()));
    assert_eq!(provider.served(), 2);
}

#[tokio::test]
async fn a_dropped_key_stops_verifying_after_a_refetch() {
    let provider = Provider::start(keys(&["k1", "k2"])).await;
    let clock = TestClock::new();
    let verifier = verifier(&provider, &clock).await;
    assert_eq!(check(&verifier, "k1").await, Ok(()));

    // Dropped, found out when the set expires.
    provider.set(keys(&["k2"]));
    clock.advance(TTL);
    assert_eq!(check(&verifier, "k2").await, Ok(()));
    assert_eq!(provider.served(), 2);
    assert_eq!(check(&verifier, "k1").await, Err(AuthError::UnknownKey));

    // Dropped, found out by the fetch that an unknown kid started.
    provider.set(keys(&["k3"]));
    clock.advance(INTERVAL);
    assert_eq!(check(&verifier, "k3").await, Ok(()));
    assert_eq!(provider.served(), 3);
    assert_eq!(check(&verifier, "k2").await, Err(AuthError::UnknownKey));
}

#[tokio::test]
async fn a_malformed_answer_keeps_the_old_keys() {
    let bad = [
        Answer::Body("<html>maintenance</html>"),
        Answer::Body(r#"{"keys": "none"}"#),
        // Parses, but replacing the keys with these would refuse everyone.
        Answer::Body(r#"{"keys": []}"#),
        Answer::Body(r#"{"keys": [{"kty": "oct", "kid": "k9", "k": "c2VjcmV0"}]}"#),
        Answer::Status(StatusCode::INTERNAL_SERVER_ERROR),
        Answer::Status(StatusCode::NOT_FOUND),
    ];
    let provider = Provider::start(keys(&["k1"])).await;
    let clock = TestClock::new();
    let verifier = verifier(&provider, &clock).await;
    clock.advance(TTL);
    for (round, answer) in bad.into_iter().enumerate() {
        provider.set(answer);
        clock.advance(INTERVAL);
        // Expired, so this asks, gets garbage and keeps k1.
        assert_eq!(check(&verifier, "k1").await, Ok(()), "round {round}");
        assert_eq!(provider.served(), round + 2, "round {round}");
        assert_eq!(
            check(&verifier, "k2").await,
            Err(AuthError::KeysUnavailable),
            "round {round}"
        );
    }
    // Once the provider answers properly again, the set is replaced.
    provider.set(keys(&["k2"]));
    clock.advance(INTERVAL);
    assert_eq!(check(&verifier, "k2").await, Ok(()));
    assert_eq!(check(&verifier, "k1").await, Err(AuthError::UnknownKey));
}

#[tokio::test]
async fn a_token_without_a_kid_does_not_fetch() {
    let provider = Provider::start(keys(&["k1", "k2"])).await;
    let clock = TestClock::new();
    let verifier = verifier(&provider, &clock).await;
    clock.advance(INTERVAL);
    let token = rs256(None, &good_claims());
    assert_eq!(verifier.verify(&token).await, Err(AuthError::UnknownKey));
    assert_eq!(provider.served(), 1);
}

#[tokio::test]
async fn start_up_needs_a_usable_set() {
    let mut provider = Provider::start(Answer::Body(r#"{"keys": []}"#)).await;
    let result = JwksCache::connect(&provider.url(), SETTINGS).await;
    assert!(
        matches!(result, Err(ConfigError::NoUsableKeys)),
        "{result:?}"
    );
    provider.stop().await;
    let result = JwksCache::connect(&provider.url(), SETTINGS).await;
    assert!(
        matches!(result, Err(ConfigError::Fetch { .. })),
        "{result:?}"
    );
}
