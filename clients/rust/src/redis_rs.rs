//! The transports for redis-rs 1.x: any `aio::ConnectionLike`, and (feature `redis-cluster`) the
//! async cluster connection, with every call routed by its first key.

use std::future::Future;
use std::ops::DerefMut;
use std::sync::Arc;

use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, RedisError, Value};

use crate::{Error, Reply, Transport};

/// A [`Transport`] over any redis-rs async connection that is cheap to clone:
/// `MultiplexedConnection`, `ConnectionManager`. For a pool, use [`RedisPool`]; for a cluster,
/// [`RedisCluster`](crate::RedisCluster).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use redis_ratelimit_client::{Limiter, RedisConnection};
///
/// let client = redis::Client::open("redis://127.0.0.1:6380/")?;
/// let limiter = Limiter::new(RedisConnection::new(client.get_multiplexed_async_connection().await?));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedisConnection<C> {
    connection: C,
}

impl<C> RedisConnection<C> {
    /// A transport over `connection`.
    pub fn new(connection: C) -> RedisConnection<C> {
        RedisConnection { connection }
    }

    /// The connection.
    pub fn get_ref(&self) -> &C {
        &self.connection
    }
}

fn command(args: &[String]) -> Cmd {
    let mut cmd = redis::cmd(&args[0]);
    for arg in &args[1..] {
        cmd.arg(arg.as_str());
    }
    cmd
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> Transport for RedisConnection<C> {
    async fn send(&self, _key: Option<String>, args: Vec<String>) -> Result<Reply, Error> {
        request(&mut self.connection.clone(), &args).await
    }

    async fn send_to_primaries(&self, args: Vec<String>) -> Result<Vec<Result<Reply, Error>>, Error> {
        Ok(vec![self.send(None, args).await])
    }
}

/// A [`Transport`] that takes a connection from a pool for each call, through the closure that
/// gets one: `deadpool_redis::Pool::get`, bb8's `Pool::get_owned`, or any pool's whose connection
/// is (or dereferences to) a redis-rs `aio::ConnectionLike`. A pool's own error (exhausted, timed
/// out) is [`Error::Unreachable`].
///
/// ```no_run
/// # async fn run(pool: deadpool_redis::Pool) {
/// use redis_ratelimit_client::{Limiter, RedisPool};
///
/// let limiter = Limiter::new(RedisPool::new(move || {
///     let pool = pool.clone();
///     async move { pool.get().await }
/// }));
/// # }
/// ```
#[derive(Clone)]
pub struct RedisPool<F> {
    get: F,
}

impl<F> RedisPool<F> {
    /// A transport that calls `get` for a connection at each call.
    pub fn new(get: F) -> RedisPool<F> {
        RedisPool { get }
    }
}

impl<F> std::fmt::Debug for RedisPool<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedisPool")
    }
}

impl<F, Fut, C, E> Transport for RedisPool<F>
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<C, E>> + Send,
    C: DerefMut<Target: ConnectionLike + Send> + Send,
    E: std::error::Error + Send + Sync + 'static,
{
    async fn send(&self, _key: Option<String>, args: Vec<String>) -> Result<Reply, Error> {
        let mut connection = (self.get)().await.map_err(|e| Error::Unreachable(Arc::new(e)))?;
        request(&mut *connection, &args).await
    }

    async fn send_to_primaries(&self, args: Vec<String>) -> Result<Vec<Result<Reply, Error>>, Error> {
        Ok(vec![self.send(None, args).await])
    }
}

/// One command on one connection, its reply or error as the crate's.
async fn request<C: ConnectionLike + ?Sized>(connection: &mut C, args: &[String]) -> Result<Reply, Error> {
    let value = connection.req_packed_command(&command(args)).await.map_err(error)?;
    reply(value)
}

/// A redis-rs error as the crate's: an error reply by its code, a reply of another shape, else
/// the server out of reach.
fn error(e: RedisError) -> Error {
    match e.kind() {
        ErrorKind::Server(_) | ErrorKind::Extension => {
            let code = e.code().unwrap_or("ERR");
            Error::from_reply(match e.detail() {
                Some(detail) => format!("{code} {detail}"),
                None => code.to_string(),
            })
        }
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => Error::UnexpectedReply(e.to_string()),
        _ => Error::Unreachable(Arc::new(e)),
    }
}

/// A redis-rs value as a [`Reply`]; a top-level error reply as an [`Error`].
fn reply(value: Value) -> Result<Reply, Error> {
    match value {
        Value::ServerError(e) => Err(error(e.into())),
        value => Ok(nested(value)),
    }
}

fn nested(value: Value) -> Reply {
    match value {
        Value::Nil => Reply::Nil,
        Value::Int(n) => Reply::Int(n),
        Value::BulkString(bytes) => Reply::Text(bytes),
        Value::SimpleString(text) => Reply::Text(text.into_bytes()),
        Value::Okay => Reply::Text(b"OK".to_vec()),
        Value::VerbatimString { text, .. } => Reply::Text(text.into_bytes()),
        Value::Array(items) | Value::Set(items) | Value::Push { data: items, .. } => {
            Reply::Array(items.into_iter().map(nested).collect())
        }
        Value::Map(pairs) => Reply::Map(pairs.into_iter().map(|(k, v)| (nested(k), nested(v))).collect()),
        Value::Attribute { data, .. } => nested(*data),
        Value::Double(d) => Reply::Double(d),
        Value::Boolean(b) => Reply::Bool(b),
        Value::ServerError(e) => {
            Reply::Error(format!("{} {}", e.code(), e.details().unwrap_or_default()).trim_end().to_string())
        }
        other => Reply::Text(format!("{other:?}").into_bytes()),
    }
}

#[cfg(feature = "redis-cluster")]
pub use cluster::RedisCluster;

#[cfg(feature = "redis-cluster")]
mod cluster {
    use redis::cluster_async::ClusterConnection;
    use redis::cluster_routing::{MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};

    use super::{command, error, nested, reply};
    use crate::{slot, Error, Reply, Transport};

    /// A [`Transport`] over redis-rs's async cluster connection. Each call goes to its first
    /// key's primary, HITALL included (redis-rs would hash a command it does not know on its
    /// first argument, HITALL's key count); the library is loaded on every primary; a call whose
    /// keys are in several slots is refused before it is sent.
    #[derive(Clone)]
    pub struct RedisCluster {
        connection: ClusterConnection,
    }

    impl RedisCluster {
        /// A transport over `connection`.
        pub fn new(connection: ClusterConnection) -> RedisCluster {
            RedisCluster { connection }
        }
    }

    impl std::fmt::Debug for RedisCluster {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("RedisCluster")
        }
    }

    impl Transport for RedisCluster {
        async fn send(&self, key: Option<String>, args: Vec<String>) -> Result<Reply, Error> {
            let node = match key {
                Some(key) => SingleNodeRoutingInfo::SpecificNode(Route::new(slot(&key), SlotAddr::Master)),
                None => SingleNodeRoutingInfo::RandomPrimary,
            };
            let mut connection = self.connection.clone();
            let value = connection.route_command(command(&args), RoutingInfo::SingleNode(node)).await.map_err(error)?;
            reply(value)
        }

        async fn send_to_primaries(&self, args: Vec<String>) -> Result<Vec<Result<Reply, Error>>, Error> {
            let mut connection = self.connection.clone();
            let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
            // Without a response policy, redis-rs answers each node's reply by its address.
            let value = connection.route_command(command(&args), routing).await.map_err(error)?;
            match nested(value) {
                Reply::Map(pairs) => Ok(pairs
                    .into_iter()
                    .map(|(_, reply)| match reply {
                        Reply::Error(message) => Err(Error::from_reply(message)),
                        reply => Ok(reply),
                    })
                    .collect()),
                other => Err(crate::error::unexpected_reply("every primary's replies", &other)),
            }
        }

        fn is_cluster(&self) -> bool {
            true
        }
    }
}
