//! The transport for fred 10: a `Client`, a `Pool`, or any of its `ClientLike`s, on one server or
//! a cluster (fred routes each call by the slot given; the library is loaded on every primary).

use std::sync::Arc;

use fred::error::{Error as FredError, ErrorKind};
use fred::interfaces::{ClientLike, ClusterInterface};
use fred::types::config::Options;
use fred::types::{ClusterHash, CustomCommand, Value};

use crate::{slot, Error, Reply, Transport};

/// A [`Transport`] over a fred 10 client: `Client`, `Pool`, or a cluster client (each call goes
/// to its first key's primary, HITALL included; a call whose keys are in several slots is refused
/// before it is sent).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use fred::prelude::*;
/// use redis_ratelimit_client::{FredConnection, Limiter};
///
/// let client = Builder::from_config(Config::from_url("redis://127.0.0.1:6380/")?).build()?;
/// client.init().await?;
/// let limiter = Limiter::new(FredConnection::new(client));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FredConnection<C> {
    client: C,
}

impl<C> FredConnection<C> {
    /// A transport over `client` (connected, or connecting: fred queues calls until it is).
    pub fn new(client: C) -> FredConnection<C> {
        FredConnection { client }
    }

    /// The client.
    pub fn get_ref(&self) -> &C {
        &self.client
    }
}

async fn send<C: ClientLike>(client: &C, hash: ClusterHash, mut args: Vec<String>) -> Result<Reply, Error> {
    let name = args.remove(0);
    let value: Value = client.custom(CustomCommand::new(name, hash, false), args).await.map_err(error)?;
    Ok(reply(value))
}

impl<C: ClientLike + ClusterInterface + 'static> Transport for FredConnection<C> {
    async fn send(&self, key: Option<String>, args: Vec<String>) -> Result<Reply, Error> {
        let hash = key.map_or(ClusterHash::Random, |key| ClusterHash::Custom(slot(&key)));
        send(&self.client, hash, args).await
    }

    async fn send_to_primaries(&self, args: Vec<String>) -> Result<Vec<Result<Reply, Error>>, Error> {
        if !self.client.is_clustered() {
            return Ok(vec![self.send(None, args).await]);
        }
        let primaries =
            self.client.cached_cluster_state().map(|state| state.unique_primary_nodes()).unwrap_or_default();
        if primaries.is_empty() {
            return Err(Error::Unreachable(Arc::new(FredError::new(ErrorKind::Cluster, "no cluster state yet"))));
        }
        let mut replies = Vec::with_capacity(primaries.len());
        for primary in primaries {
            let node = self.client.with_options(&Options { cluster_node: Some(primary), ..Options::default() });
            replies.push(send(&node, ClusterHash::Random, args.clone()).await);
        }
        Ok(replies)
    }

    fn is_cluster(&self) -> bool {
        self.client.is_clustered()
    }
}

/// A fred error as the crate's: an error reply (fred keeps it whole in its details) by its code,
/// a reply it could not read, else the server out of reach.
fn error(e: FredError) -> Error {
    let code = e.details().split_whitespace().next().unwrap_or("");
    let from_server = !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
    match e.kind() {
        ErrorKind::Unknown
        | ErrorKind::InvalidArgument
        | ErrorKind::InvalidCommand
        | ErrorKind::Auth
        | ErrorKind::Cluster
            if from_server =>
        {
            Error::from_reply(e.details())
        }
        ErrorKind::Parse | ErrorKind::Protocol => Error::UnexpectedReply(e.to_string()),
        _ => Error::Unreachable(Arc::new(e)),
    }
}

fn reply(value: Value) -> Reply {
    match value {
        Value::Null => Reply::Nil,
        Value::Integer(n) => Reply::Int(n),
        Value::String(text) => Reply::Text(text.as_bytes().to_vec()),
        Value::Bytes(bytes) => Reply::Text(bytes.to_vec()),
        Value::Queued => Reply::Text(b"QUEUED".to_vec()),
        Value::Array(items) => Reply::Array(items.into_iter().map(reply).collect()),
        Value::Map(map) => Reply::Map(
            map.inner().into_iter().map(|(key, value)| (Reply::Text(key.as_bytes().to_vec()), reply(value))).collect(),
        ),
        Value::Double(d) => Reply::Double(d),
        Value::Boolean(b) => Reply::Bool(b),
    }
}
