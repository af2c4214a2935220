//! What a Redis client gives the limiter: one command sent (routed by its key in a cluster), and
//! one command sent to every primary. The `redis` feature implements it for redis-rs;
//! implement it for any other client.

use std::future::Future;

use crate::{Error, Reply};

/// A connection to one server or to a cluster, shared by every call (it is cloned into the
/// futures and tasks that need it, so it should be cheap to clone).
pub trait Transport: Clone + Send + Sync + 'static {
    /// Sends one command; in a cluster to the primary of `key`'s slot (any primary for `None`).
    /// An error reply is an [`Error`] classified by [`Error::from_reply`], a connection failure
    /// or a timeout an [`Error::Unreachable`].
    fn send(&self, key: Option<String>, args: Vec<String>) -> impl Future<Output = Result<Reply, Error>> + Send;

    /// Sends one command to every primary (one server: itself): each node's reply or error.
    /// The limiter loads the Functions library this way where the module is missing.
    fn send_to_primaries(
        &self,
        args: Vec<String>,
    ) -> impl Future<Output = Result<Vec<Result<Reply, Error>>, Error>> + Send;

    /// Whether keys are spread over slots, so that a call's keys must share one: the limiter
    /// then refuses a call whose keys do not, before sending it.
    fn is_cluster(&self) -> bool {
        false
    }
}
