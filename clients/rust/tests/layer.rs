//! The tower layer on a real axum server over HTTP and a real tonic server over gRPC.

#![cfg(all(feature = "axum", feature = "tonic"))]

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Extension;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use common::{key, Kind, Server, KINDS};
use http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use redis_ratelimit_client::layer::{ClientIp, Header, RateLimitLayer, Rule, Verdict};
use redis_ratelimit_client::{Fixed, Limiter, RedisConnection, Transport};
use tokio::sync::Notify;

const MINUTE: Duration = Duration::from_secs(60);

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await.unwrap();
    });
    addr
}

fn app<T: Transport>(layer: RateLimitLayer<T>) -> Router {
    app_ending(layer, Arc::new(Notify::new()))
}

/// The app, its streamed body ending when `end` is notified.
fn app_ending<T: Transport>(layer: RateLimitLayer<T>, end: Arc<Notify>) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .route(
            "/login",
            get(|headers: HeaderMap| async move {
                if headers.get("x-password").is_some_and(|p| p == "right") {
                    StatusCode::OK
                } else {
                    StatusCode::UNAUTHORIZED
                }
            }),
        )
        .route("/tokens", get(|| async { ([("x-used-tokens", "3")], "answer") }))
        .route("/verdict", get(|Extension(v): Extension<Verdict>| async move { format!("{}", v.shadow_denied) }))
        .route(
            "/stream",
            get(|Extension(end): Extension<Arc<Notify>>| async move {
                // A body that ends after the handler returned, when the test says.
                let (tx, rx) = tokio::sync::mpsc::channel::<Result<http_body::Frame<Bytes>, Infallible>>(1);
                tokio::spawn(async move {
                    let _ = tx.send(Ok(http_body::Frame::data(Bytes::from_static(b"a")))).await;
                    end.notified().await;
                    let _ = tx.send(Ok(http_body::Frame::data(Bytes::from_static(b"b")))).await;
                });
                Body::new(StreamBody::new(tokio_stream_from(rx)))
            }),
        )
        .layer(layer)
        .layer(Extension(end))
}

fn tokio_stream_from<T: Send + 'static>(mut rx: tokio::sync::mpsc::Receiver<T>) -> impl futures_core::Stream<Item = T> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

async fn get_path(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Answer {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut request = http::Request::get(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client.request(request.body(Full::new(Bytes::new())).unwrap()).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap();
    Answer { status: parts.status, headers: parts.headers, body }
}

fn header<'a>(answer: &'a Answer, name: &str) -> &'a str {
    answer.headers.get(name).map_or("", |v| v.to_str().unwrap())
}

/// Whether `value` is `prefix` and then the 60 s a minute's window had left, or 59 when a second
/// passed between the window's first hit and this answer (a busy machine).
fn a_minute_left(value: &str, prefix: &str) -> bool {
    matches!(value.strip_prefix(prefix), Some("60" | "59"))
}

#[tokio::test]
async fn denies_with_the_headers_every_client_writes() {
    for kind in KINDS {
        let server = Server::start(kind);
        let layer = RateLimitLayer::new(server.limiter().await)
            .prefix(key("h"))
            .rule(Rule::fixed(2, MINUTE).name("api"))
            .x_ratelimit_headers();
        let addr = serve(app(layer)).await;
        let first = get_path(addr, "/", &[]).await;
        assert_eq!((first.status, first.body.as_str()), (StatusCode::OK, "ok"));
        assert_eq!(header(&first, "ratelimit-policy"), "\"api\";q=2;w=60");
        assert_eq!(header(&first, "ratelimit"), "\"api\";r=1;t=60");
        assert_eq!(header(&first, "x-ratelimit-remaining"), "1");
        get_path(addr, "/", &[]).await;
        let denied = get_path(addr, "/", &[]).await;
        assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS, "{kind:?}");
        assert_eq!(denied.body, "Too Many Requests\n");
        assert!(a_minute_left(header(&denied, "ratelimit"), "\"api\";r=0;t="), "{}", header(&denied, "ratelimit"));
        assert!(a_minute_left(header(&denied, "retry-after"), ""));
    }
}

#[tokio::test]
async fn keys_from_trusted_proxies_and_headers_per_route() {
    let server = Server::start(Kind::Module);
    let layer = RateLimitLayer::new(server.limiter().await)
        .prefix(key("k"))
        .key(ClientIp::trusting(["127.0.0.1"]))
        .rule(Rule::fixed(1, MINUTE).path("/"))
        .rule(
            Rule::all_of([Fixed::new(1, MINUTE), Fixed::new(5, Duration::from_secs(3600))])
                .path("/tokens")
                .name("both")
                .key(Header(http::HeaderName::from_static("x-api-key"))),
        );
    let addr = serve(app(layer)).await;
    // Behind the trusted proxy (the test itself), each forwarded client has its own limit.
    assert_eq!(get_path(addr, "/", &[("x-forwarded-for", "6.6.6.6, 203.0.113.1")]).await.status, StatusCode::OK);
    assert_eq!(get_path(addr, "/", &[("x-forwarded-for", "203.0.113.2")]).await.status, StatusCode::OK);
    // A forged leftmost entry changes nothing: the proxy's hop is the client.
    let forged = get_path(addr, "/", &[("x-forwarded-for", "7.7.7.7, 203.0.113.1")]).await;
    assert_eq!(forged.status, StatusCode::TOO_MANY_REQUESTS);
    // Not limited by a rule of another path; a request without the key's header not limited at all.
    let both = get_path(addr, "/tokens", &[("x-api-key", "a")]).await;
    assert_eq!(header(&both, "ratelimit-policy"), "\"both-0\";q=1;w=60, \"both-1\";q=5;w=3600");
    let denied = get_path(addr, "/tokens", &[("x-api-key", "a")]).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(a_minute_left(header(&denied, "ratelimit"), "\"both-0\";r=0;t="), "{}", header(&denied, "ratelimit"));
    assert_eq!(get_path(addr, "/tokens", &[]).await.status, StatusCode::OK);
}

#[tokio::test]
async fn counts_failures_only_and_settles_from_the_response() {
    let server = Server::start(Kind::Module);
    let rl = server.limiter().await;
    let prefix = key("f");
    let layer = RateLimitLayer::new(rl.clone())
        .prefix(prefix.clone())
        .rule(Rule::fixed(2, MINUTE).path("/login").name("logins").count_when(|s| s == StatusCode::UNAUTHORIZED))
        .rule(
            Rule::fixed(100, MINUTE)
                .path("/tokens")
                .name("tokens")
                .cost(|_| 10)
                .settle_from(|response| response.headers.get("x-used-tokens")?.to_str().ok()?.parse().ok()),
        );
    let addr = serve(app(layer)).await;
    for _ in 0..3 {
        assert_eq!(get_path(addr, "/login", &[("x-password", "right")]).await.status, StatusCode::OK);
    }
    for _ in 0..2 {
        assert_eq!(get_path(addr, "/login", &[]).await.status, StatusCode::UNAUTHORIZED);
    }
    // The failures are counted on the runtime after their responses: the third is refused once
    // they were.
    let mut status = StatusCode::OK;
    for _ in 0..500 {
        status = get_path(addr, "/login", &[("x-password", "right")]).await.status;
        if status == StatusCode::TOO_MANY_REQUESTS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "two failures fill the limit of 2");

    assert_eq!(get_path(addr, "/tokens", &[]).await.status, StatusCode::OK);
    let tokens_key = format!("{prefix}{{tokens:127.0.0.1}}");
    let mut count = 0;
    for _ in 0..500 {
        count = rl.peek(&tokens_key, 100, 1).await.unwrap().count;
        if count == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(count, 3, "10 reserved, settled with the 3 the response used");
}

#[tokio::test]
async fn shadow_mode_lets_through_what_it_would_deny() {
    let server = Server::start(Kind::Module);
    let layer = RateLimitLayer::new(server.limiter().await).prefix(key("s")).rule(Rule::fixed(1, MINUTE)).shadow();
    let addr = serve(app(layer)).await;
    assert_eq!(get_path(addr, "/verdict", &[]).await.body, "false");
    let shadowed = get_path(addr, "/verdict", &[]).await;
    assert_eq!((shadowed.status, shadowed.body.as_str()), (StatusCode::OK, "true"));
    assert_eq!(header(&shadowed, "retry-after"), "");
}

#[tokio::test]
async fn out_of_reach_fails_open_or_closed_as_told() {
    let mut server = Server::start(Kind::Module);
    let rl: Limiter<RedisConnection<_>> = server.limiter().await;
    rl.backend().await.unwrap();
    let open = serve(app(RateLimitLayer::new(rl.clone()).rule(Rule::fixed(1, MINUTE)))).await;
    let closed = serve(app(RateLimitLayer::new(rl).rule(Rule::fixed(1, MINUTE)).fail_closed())).await;
    server.kill();
    assert_eq!(get_path(open, "/", &[]).await.status, StatusCode::OK);
    let refused = get_path(closed, "/", &[]).await;
    assert_eq!((refused.status, header(&refused, "retry-after")), (StatusCode::SERVICE_UNAVAILABLE, "1"));
}

#[tokio::test]
async fn an_in_flight_permit_is_held_until_the_body_ends() {
    let server = Server::start(Kind::Module);
    let layer = RateLimitLayer::concurrency(server.limiter().await, 1, Duration::from_secs(30)).prefix(key("c"));
    let end = Arc::new(Notify::new());
    let addr = serve(app_ending(layer, Arc::clone(&end))).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let streaming = client.get(format!("http://{addr}/stream").parse().unwrap()).await.unwrap();
    assert_eq!(streaming.status(), StatusCode::OK);
    // The handler returned; its body streams on, holding the permit.
    let busy = get_path(addr, "/", &[]).await;
    assert_eq!(busy.status, StatusCode::TOO_MANY_REQUESTS);
    end.notify_one();
    assert_eq!(streaming.into_body().collect().await.unwrap().to_bytes(), Bytes::from_static(b"ab"));
    let mut status = StatusCode::TOO_MANY_REQUESTS;
    for _ in 0..500 {
        status = get_path(addr, "/", &[]).await.status;
        if status == StatusCode::OK {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status, StatusCode::OK, "released when the body ended");
}

#[tokio::test]
async fn tonic_answers_resource_exhausted_with_the_headers_as_metadata() {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;

    let server = Server::start(Kind::Module);
    let layer = RateLimitLayer::new(server.limiter().await).prefix(key("g")).rule(Rule::fixed(1, MINUTE).name("grpc"));
    let (_reporter, health) = tonic_health::server::health_reporter();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .unwrap();
    });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    let mut client = HealthClient::new(channel);
    let first = client.check(HealthCheckRequest { service: String::new() }).await.unwrap();
    assert_eq!(first.metadata().get("ratelimit").unwrap(), "\"grpc\";r=0;t=60");
    let denied = client.check(HealthCheckRequest { service: String::new() }).await.unwrap_err();
    assert_eq!(denied.code(), tonic::Code::ResourceExhausted);
    assert_eq!(denied.metadata().get("ratelimit-policy").unwrap(), "\"grpc\";q=1;w=60");
    assert!(a_minute_left(denied.metadata().get("retry-after").unwrap().to_str().unwrap(), ""));
}
