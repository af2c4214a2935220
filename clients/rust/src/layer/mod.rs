//! The tower layer (feature `tower`): the rules on every request of an axum router, a hyper
//! service or a tonic server, with one `.layer()`.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use redis_ratelimit_client::layer::{ClientIp, RateLimitLayer, Rule};
//! use redis_ratelimit_client::{Limiter, RedisConnection};
//!
//! let client = redis::Client::open("redis://127.0.0.1:6380/")?;
//! let limiter = Limiter::new(RedisConnection::new(client.get_multiplexed_async_connection().await?));
//! let layer = RateLimitLayer::new(limiter)
//!     .rule(Rule::fixed(100, Duration::from_secs(60)))
//!     .key(ClientIp::trusting(["10.0.0.0/8"]));
//! let app: axum::Router = axum::Router::new().layer(layer);
//! # let _ = app; Ok(()) }
//! ```

mod body;
mod decide;
mod key;
mod rule;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

pub use body::ResponseBody;
pub use decide::Verdict;
pub use key::{peer_addr, ClientIp, Global, Header, IpRange, KeyExtractor, PathKey};
pub use rule::Rule;

use crate::results::whole_seconds;
use crate::{Limiter, Transport};
use decide::{Admitted, Decided, Refusal};

/// What a denial's body is made from: how long until the request would be admitted (`None`:
/// never, or unknown), and whether it is a gRPC call.
#[derive(Debug, Clone, Copy)]
pub struct Denial {
    /// How long until the same request would be admitted.
    pub retry_after: Option<Duration>,
    /// The request is a gRPC call (`content-type: application/grpc...`).
    pub grpc: bool,
}

type DenialBody = Arc<dyn Fn(&Denial) -> (HeaderValue, Bytes) + Send + Sync>;

/// In the extensions of a 500 the layer answered: why the limiter failed (a key of another
/// type, an ACL refusal), for the application's logs.
#[derive(Debug, Clone)]
pub struct LimiterFailure(pub Arc<crate::Error>);

/// The layer's settings, shared by every clone.
#[derive(Clone)]
pub(crate) struct Config<T> {
    limiter: Limiter<T>,
    rules: Vec<Rule>,
    key: Arc<dyn KeyExtractor>,
    prefix: String,
    fail_open: bool,
    shadow: bool,
    x_headers: bool,
    denial_body: DenialBody,
}

/// A tower [`Layer`] that limits requests by rules, on Redis or Valkey. Cheap to clone (its
/// settings are shared); every clone, every pod and every service in any language that uses the
/// same keys shares the limits.
///
/// Each request goes through the rules that match it, in order; the first that denies answers
/// 429 (gRPC: `RESOURCE_EXHAUSTED`), and the rules before it have counted the request (use
/// [`Rule::all_of`] for several limits all or nothing). Every response carries `RateLimit` and
/// `RateLimit-Policy`, a denial `Retry-After`.
pub struct RateLimitLayer<T> {
    config: Arc<Config<T>>,
}

impl<T> Clone for RateLimitLayer<T> {
    fn clone(&self) -> Self {
        RateLimitLayer { config: Arc::clone(&self.config) }
    }
}

impl<T> std::fmt::Debug for RateLimitLayer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitLayer").field("rules", &self.config.rules).finish()
    }
}

fn too_many(denial: &Denial) -> (HeaderValue, Bytes) {
    let _ = denial;
    (HeaderValue::from_static("text/plain; charset=utf-8"), Bytes::from_static(b"Too Many Requests\n"))
}

impl<T: Transport> RateLimitLayer<T> {
    /// A layer with no rule yet, keyed by the peer's address ([`ClientIp::new`]), its keys under
    /// `rl:`, failing open (requests admitted while Redis is out of reach).
    pub fn new(limiter: Limiter<T>) -> RateLimitLayer<T> {
        RateLimitLayer {
            config: Arc::new(Config {
                limiter,
                rules: Vec::new(),
                key: Arc::new(ClientIp::new()),
                prefix: "rl:".to_string(),
                fail_open: true,
                shadow: false,
                x_headers: false,
                denial_body: Arc::new(too_many),
            }),
        }
    }

    /// A fleet-wide in-flight limit: at most `limit` requests at once, each holding a permit
    /// until its response body ends (a [`Rule::in_flight`] on every request, keyed [`Global`]).
    pub fn concurrency(limiter: Limiter<T>, limit: u64, lease: Duration) -> RateLimitLayer<T> {
        RateLimitLayer::new(limiter).rule(Rule::in_flight(limit, lease).name("in-flight").key(Global))
    }

    fn with(mut self, change: impl FnOnce(&mut Config<T>)) -> RateLimitLayer<T> {
        // A layer configured after it was cloned changes its own settings only.
        change(Arc::make_mut(&mut self.config));
        self
    }

    /// Adds a rule (checked now: a limit the module would refuse panics at start-up, not on the
    /// first request).
    pub fn rule(self, rule: Rule) -> RateLimitLayer<T> {
        rule.check();
        self.with(|c| c.rules.push(rule))
    }

    /// The identity a rule counts by where it names none.
    pub fn key(self, key: impl KeyExtractor) -> RateLimitLayer<T> {
        self.with(|c| c.key = Arc::new(key))
    }

    /// The keys' prefix (`rl:`).
    pub fn prefix(self, prefix: impl Into<String>) -> RateLimitLayer<T> {
        let prefix = prefix.into();
        self.with(|c| c.prefix = prefix)
    }

    /// When Redis is out of reach, refuse requests with 503 (gRPC: `UNAVAILABLE`) instead of
    /// admitting them.
    pub fn fail_closed(self) -> RateLimitLayer<T> {
        self.with(|c| c.fail_open = false)
    }

    /// Shadow mode: requests a limit denies are let through ([`Verdict::shadow_denied`] in their
    /// extensions), to see what a limit would do before enforcing it.
    pub fn shadow(self) -> RateLimitLayer<T> {
        self.with(|c| c.shadow = true)
    }

    /// Also `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (seconds), from
    /// the limit `RateLimit` names.
    pub fn x_ratelimit_headers(self) -> RateLimitLayer<T> {
        self.with(|c| c.x_headers = true)
    }

    /// A denial's body and its content type, instead of `Too Many Requests`.
    pub fn denial_body(
        self,
        body: impl Fn(&Denial) -> (HeaderValue, Bytes) + Send + Sync + 'static,
    ) -> RateLimitLayer<T> {
        self.with(|c| c.denial_body = Arc::new(body))
    }
}

impl<S, T> Layer<S> for RateLimitLayer<T> {
    type Service = RateLimit<S, T>;

    fn layer(&self, inner: S) -> RateLimit<S, T> {
        RateLimit { inner, config: Arc::clone(&self.config) }
    }
}

/// The service [`RateLimitLayer`] makes.
pub struct RateLimit<S, T> {
    inner: S,
    config: Arc<Config<T>>,
}

impl<S: Clone, T> Clone for RateLimit<S, T> {
    fn clone(&self) -> Self {
        RateLimit { inner: self.inner.clone(), config: Arc::clone(&self.config) }
    }
}

impl<S: std::fmt::Debug, T> std::fmt::Debug for RateLimit<S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit").field("inner", &self.inner).finish()
    }
}

impl<S, T> RateLimit<S, T> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

fn is_grpc<B>(request: &Request<B>) -> bool {
    request.headers().get(http::header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

impl<S, T, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, T>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    T: Transport,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, T, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The service polled ready goes with this request; its clone stays for the next.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let (parts, body) = request.into_parts();
        let steps = decide::steps(&self.config, &parts);
        let request = Request::from_parts(parts, body);
        let grpc = is_grpc(&request);
        let state = if steps.is_empty() {
            State::Calling {
                future: {
                    let mut inner = inner;
                    inner.call(request)
                },
                admitted: None,
            }
        } else {
            State::Deciding {
                decision: Box::pin(decide::decide(Arc::clone(&self.config), steps)),
                inner: Some(inner),
                request: Some(request),
            }
        };
        ResponseFuture { state, config: Arc::clone(&self.config), grpc }
    }
}

pin_project! {
    /// The response future of [`RateLimit`]: the rules' decision (one boxed future: its Redis
    /// calls), then the inner service's own future, unboxed.
    pub struct ResponseFuture<S: Service<Request<ReqBody>>, T, ReqBody> {
        #[pin]
        state: State<S, ReqBody>,
        config: Arc<Config<T>>,
        grpc: bool,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S: Service<Request<ReqBody>>, ReqBody> {
        Deciding {
            decision: Pin<Box<dyn Future<Output = Decided> + Send>>,
            inner: Option<S>,
            request: Option<Request<ReqBody>>,
        },
        Calling {
            #[pin]
            future: S::Future,
            admitted: Option<Admitted>,
        },
    }
}

impl<S, T, ReqBody, ResBody> Future for ResponseFuture<S, T, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    T: Transport,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Deciding { decision, inner, request } => {
                    let admitted = match ready!(decision.as_mut().poll(cx)) {
                        Decided::Admit(admitted) => admitted,
                        Decided::Refuse(refused) => return Poll::Ready(Ok(refusal(this.config, refused, *this.grpc))),
                    };
                    let mut request = request.take().expect("polled after completion");
                    request.extensions_mut().insert(admitted.verdict.clone());
                    let future = inner.take().expect("polled after completion").call(request);
                    this.state.set(State::Calling { future, admitted: Some(admitted) });
                }
                StateProj::Calling { future, admitted } => {
                    let response = ready!(future.poll(cx))?;
                    let (mut parts, body) = response.into_parts();
                    let Some(admitted) = admitted.take() else {
                        return Poll::Ready(Ok(Response::from_parts(parts, ResponseBody::inner(body, None))));
                    };
                    add_headers(&mut parts.headers, &admitted.headers);
                    decide::after_response(this.config, admitted.after, &parts);
                    let guard = (!admitted.guards.is_empty()).then(|| Box::new(admitted.guards) as body::Guard);
                    return Poll::Ready(Ok(Response::from_parts(parts, ResponseBody::inner(body, guard))));
                }
            }
        }
    }
}

fn add_headers(headers: &mut http::HeaderMap, added: &[(&'static str, String)]) {
    for (name, value) in added {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(lowercase(name)), value);
        }
    }
}

/// The headers' names as `HeaderName::from_static` takes them.
fn lowercase(name: &'static str) -> &'static str {
    match name {
        "RateLimit" => "ratelimit",
        "RateLimit-Policy" => "ratelimit-policy",
        "Retry-After" => "retry-after",
        "X-RateLimit-Limit" => "x-ratelimit-limit",
        "X-RateLimit-Remaining" => "x-ratelimit-remaining",
        "X-RateLimit-Reset" => "x-ratelimit-reset",
        other => other,
    }
}

/// A denial, an outage's refusal or a failure, as HTTP or as gRPC (a trailers-only response:
/// the status in the headers, with the limits' headers as its metadata).
fn refusal<T, B>(config: &Config<T>, refused: Refusal, grpc: bool) -> Response<ResponseBody<B>> {
    let mut failure = None;
    let (status, grpc_status, message, headers, body) = match refused {
        Refusal::Deny { retry_after, headers } => {
            let (content_type, bytes) = (config.denial_body)(&Denial { retry_after, grpc });
            (StatusCode::TOO_MANY_REQUESTS, "8", "Too Many Requests", headers, Some((content_type, bytes)))
        }
        Refusal::Unavailable => {
            let retry = vec![("Retry-After", whole_seconds(Duration::from_secs(1)).to_string())];
            (StatusCode::SERVICE_UNAVAILABLE, "14", "the rate limiter cannot be reached", retry, None)
        }
        Refusal::Failed(error) => {
            failure = Some(error);
            (StatusCode::INTERNAL_SERVER_ERROR, "13", "the rate limiter failed", Vec::new(), None)
        }
    };
    let mut response = Response::new(ResponseBody::full(Bytes::new()));
    if let Some(error) = failure {
        // For the application's own logging or tracing layer.
        response.extensions_mut().insert(LimiterFailure(Arc::new(error)));
    }
    add_headers(response.headers_mut(), &headers);
    if grpc {
        let h = response.headers_mut();
        h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        h.insert("grpc-status", HeaderValue::from_static(grpc_status));
        h.insert("grpc-message", HeaderValue::from_static(message));
        return response;
    }
    *response.status_mut() = status;
    let (content_type, bytes) = body.unwrap_or_else(|| {
        (HeaderValue::from_static("text/plain; charset=utf-8"), Bytes::from(format!("{message}\n")))
    });
    response.headers_mut().insert(http::header::CONTENT_TYPE, content_type);
    *response.body_mut() = ResponseBody::full(bytes);
    response
}
