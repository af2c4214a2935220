//! The limiter: finds the backend once (the module, else the Functions library, loaded where it
//! is missing), then sends the codec's calls over a [`Transport`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;

use crate::command::{adaptive, gcra, lease, settle, top, window, Command};
use crate::error::invalid;
use crate::limits::{Adaptive, AllOptions, Fixed, Limit, Rate, Report, Sliding, TopOptions};
use crate::results::{
    Acquisition, Decision, Grant, Learned, MultiDecision, MultiReservation, Reservation, Settlement, TopEntry,
};
use crate::slot::slot;
use crate::{Error, Reply, Transport};

/// The Functions library (`functions/ratelimit.lua`): what the limiter loads with `FUNCTION LOAD`
/// on a server without the module.
pub const LIBRARY_SOURCE: &str = include_str!("ratelimit.lua");

/// The library's name in `FUNCTION LIST`.
pub const LIBRARY_NAME: &str = "ratelimit";

/// What answers the limiter's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The module's commands.
    Module,
    /// The Functions library, through `FCALL`.
    Library,
}

/// The limiters' calls over one [`Transport`]. Cheap to clone: clones share the connection and
/// the backend found.
///
/// The backend is found on the first call, once for every caller waiting on it: the module if
/// the server answers its commands, else the Functions library, loaded on every primary that
/// lacks it (unless [`Limiter::without_library_load`]) and loaded again when the server lost it
/// (a restart without persistence, `FUNCTION FLUSH`). A search that failed is made again by the
/// next call.
#[derive(Debug)]
pub struct Limiter<T> {
    inner: Arc<Inner<T>>,
}

#[derive(Debug)]
struct Inner<T> {
    transport: T,
    load_library: bool,
    backend: OnceCell<Backend>,
}

impl<T> Clone for Limiter<T> {
    fn clone(&self) -> Self {
        Limiter { inner: Arc::clone(&self.inner) }
    }
}

impl<T: Transport> Limiter<T> {
    /// A limiter over `transport` (the `redis` feature's [`RedisConnection`](crate::RedisConnection)
    /// the `fred` feature's, or one of your own).
    pub fn new(transport: T) -> Limiter<T> {
        Limiter { inner: Arc::new(Inner { transport, load_library: true, backend: OnceCell::new() }) }
    }

    /// A limiter that expects the library loaded already on a server without the module
    /// ([`Error::LibraryNotLoaded`] otherwise), rather than load it.
    pub fn without_library_load(transport: T) -> Limiter<T> {
        Limiter { inner: Arc::new(Inner { transport, load_library: false, backend: OnceCell::new() }) }
    }

    /// The transport the limiter sends over.
    pub fn transport(&self) -> &T {
        &self.inner.transport
    }

    /// The backend, found by the first call (and by this one if none was made yet).
    pub async fn backend(&self) -> Result<Backend, Error> {
        self.inner.backend.get_or_try_init(|| self.probe()).await.copied()
    }

    async fn probe(&self) -> Result<Backend, Error> {
        // Asked with no arguments, the module answers its arity error; a server without it
        // "unknown command". No key is touched, and no MODULE LIST is needed (managed services
        // refuse it).
        match self.inner.transport.send(None, vec!["RATELIMIT.PEEK".to_string()]).await {
            Err(Error::Refused(m)) if m.to_ascii_lowercase().contains("unknown command") => {
                self.ensure_library().await.map(|()| Backend::Library)
            }
            Err(e) if e.server_message().is_none() => Err(e),
            _ => Ok(Backend::Module),
        }
    }

    /// Loads the library on every primary that lacks it (never REPLACE: a newer one loaded by
    /// hand stays).
    async fn ensure_library(&self) -> Result<(), Error> {
        let list = ["FUNCTION", "LIST", "LIBRARYNAME", LIBRARY_NAME].map(str::to_string).to_vec();
        let listings = self.inner.transport.send_to_primaries(list).await?;
        let mut missing = false;
        for listing in listings {
            missing |= !has_library(&listing?);
        }
        if !missing {
            return Ok(());
        }
        if !self.inner.load_library {
            return Err(Error::LibraryNotLoaded);
        }
        let load = vec!["FUNCTION".to_string(), "LOAD".to_string(), LIBRARY_SOURCE.to_string()];
        for loaded in self.inner.transport.send_to_primaries(load).await? {
            match loaded {
                Err(e) if e.server_message().is_some_and(|m| m.contains("already exists")) => {}
                other => {
                    other?;
                }
            }
        }
        Ok(())
    }

    /// Sends a built call to the backend found, and reads its reply.
    async fn send<R>(&self, call: Result<Command<R>, Error>) -> Result<R, Error> {
        let call = call?;
        if self.inner.transport.is_cluster() {
            if let Some((first, rest)) = call.keys.split_first() {
                if rest.iter().any(|key| slot(key) != slot(first)) {
                    return Err(Error::CrossSlot(
                        "CROSSSLOT Keys in request don't hash to the same slot (give them one hash tag, e.g. \
                         rl:{user:42}:s)"
                            .to_string(),
                    ));
                }
            }
        }
        let backend = self.backend().await?;
        let args = match backend {
            Backend::Module => call.module_args(),
            Backend::Library => call.library_args().ok_or_else(|| {
                invalid(format!("{} needs the module (the Functions library has no such function)", call.name))
            })?,
        };
        let key = call.keys.first().cloned();
        // Kept for a second try on the library only: the module's calls send theirs as they are.
        let again = (backend == Backend::Library).then(|| (key.clone(), args.clone()));
        let reply = match (self.inner.transport.send(key, args).await, again) {
            // The server lost the library (a restart without persistence, FUNCTION FLUSH): again.
            (Err(Error::LibraryMissing(_)), Some((key, args))) => {
                self.ensure_library().await?;
                self.inner.transport.send(key, args).await?
            }
            (reply, _) => reply?,
        };
        (call.parse)(&reply)
    }

    /// Counts a call against a fixed window (`RATELIMIT.HIT`).
    pub async fn hit(&self, key: &str, f: &Fixed) -> Result<Decision, Error> {
        self.send(window::hit(key, f)).await
    }

    /// Counts as much of the cost as the fixed window has left, at least 1 (`HIT ... PARTIAL`).
    pub async fn hit_up_to(&self, key: &str, f: &Fixed) -> Result<Grant, Error> {
        self.send(window::hit_up_to(key, f)).await
    }

    /// Counts an estimate (the cost) against a fixed window, and reserves it for
    /// [`settle`](Limiter::settle).
    pub async fn reserve_hit(&self, key: &str, f: &Fixed) -> Result<Reservation, Error> {
        self.send(window::reserve_hit(key, f)).await
    }

    /// Counts as much of the cost as the fixed window has left, at least 1, and reserves what
    /// was granted ([`Reservation::amount`]).
    pub async fn reserve_hit_up_to(&self, key: &str, f: &Fixed) -> Result<Reservation, Error> {
        self.send(window::reserve_hit_up_to(key, f)).await
    }

    /// Gives `amount` back to the fixed window running now (the limit's cost is not read).
    pub async fn refund_hit(&self, key: &str, f: &Fixed, amount: u64) -> Result<Decision, Error> {
        self.send(window::refund_hit(key, f, amount)).await
    }

    /// Whether a HIT of `cost` would be admitted, writing nothing (`RATELIMIT.PEEK`).
    pub async fn peek(&self, key: &str, limit: u64, cost: u64) -> Result<Decision, Error> {
        self.send(window::peek(key, limit, cost)).await
    }

    /// Counts a call against a sliding window (`RATELIMIT.SLIDE`).
    pub async fn slide(&self, key: &str, s: &Sliding) -> Result<Decision, Error> {
        self.send(window::slide(key, s)).await
    }

    /// Whether a SLIDE would be admitted, writing nothing (`SLIDE ... PEEK`).
    pub async fn slide_peek(&self, key: &str, s: &Sliding) -> Result<Decision, Error> {
        self.send(window::slide_peek(key, s)).await
    }

    /// Counts as much of the cost as the sliding window's estimate has room for, at least 1.
    pub async fn slide_up_to(&self, key: &str, s: &Sliding) -> Result<Grant, Error> {
        self.send(window::slide_up_to(key, s)).await
    }

    /// Counts an estimate against a sliding window, and reserves it.
    pub async fn reserve_slide(&self, key: &str, s: &Sliding) -> Result<Reservation, Error> {
        self.send(window::reserve_slide(key, s)).await
    }

    /// Counts as much of the cost as the sliding window has room for, at least 1, and reserves it.
    pub async fn reserve_slide_up_to(&self, key: &str, s: &Sliding) -> Result<Reservation, Error> {
        self.send(window::reserve_slide_up_to(key, s)).await
    }

    /// Gives `amount` back to the sliding window's current window.
    pub async fn refund_slide(&self, key: &str, s: &Sliding, amount: u64) -> Result<Decision, Error> {
        self.send(window::refund_slide(key, s, amount)).await
    }

    /// Decides a call against the limit the fleet learns at `key` (`RATELIMIT.ADAPT`): paced, at
    /// most a sixth of a window's limit at once; the decision's `limit` is the learned one.
    pub async fn adapt(&self, key: &str, a: &Adaptive) -> Result<Decision, Error> {
        self.send(adaptive::adapt(key, a)).await
    }

    /// Takes as much of the cost as the adaptive limit's bucket has, at least 1 (`ADAPT ... PARTIAL`).
    pub async fn adapt_up_to(&self, key: &str, a: &Adaptive) -> Result<Grant, Error> {
        self.send(adaptive::adapt_up_to(key, a)).await
    }

    /// Takes an estimate (an LLM call's tokens before the answer) from an adaptive limit, and
    /// reserves it (`ADAPT ... RESERVE`): settle it with what was used, and the unused part goes
    /// back to the fleet's bucket, never counted as use that earns growth.
    pub async fn reserve_adapt(&self, key: &str, a: &Adaptive) -> Result<Reservation, Error> {
        self.send(adaptive::reserve_adapt(key, a)).await
    }

    /// Takes as much of the cost as the adaptive limit's bucket has, at least 1, and reserves it.
    pub async fn reserve_adapt_up_to(&self, key: &str, a: &Adaptive) -> Result<Reservation, Error> {
        self.send(adaptive::reserve_adapt_up_to(key, a)).await
    }

    /// Tells the adaptive limit at `key` how its provider answered (`RATELIMIT.REPORT`); `None`
    /// where no limit is learned there (nothing to steer, nothing written).
    pub async fn report(&self, key: &str, r: &Report) -> Result<Option<Learned>, Error> {
        self.send(adaptive::report(key, r)).await
    }

    /// Takes tokens from a GCRA bucket (`RATELIMIT.GCRA`).
    pub async fn gcra(&self, key: &str, r: &Rate) -> Result<Decision, Error> {
        self.send(gcra::gcra(key, r)).await
    }

    /// Takes as many of the tokens as the bucket has whole, at least 1 (`GCRA ... PARTIAL`).
    pub async fn gcra_up_to(&self, key: &str, r: &Rate) -> Result<Grant, Error> {
        self.send(gcra::gcra_up_to(key, r)).await
    }

    /// Takes an estimate from a bucket, and reserves it.
    pub async fn reserve_gcra(&self, key: &str, r: &Rate) -> Result<Reservation, Error> {
        self.send(gcra::reserve_gcra(key, r)).await
    }

    /// Takes as many of the tokens as the bucket has whole, at least 1, and reserves them.
    pub async fn reserve_gcra_up_to(&self, key: &str, r: &Rate) -> Result<Reservation, Error> {
        self.send(gcra::reserve_gcra_up_to(key, r)).await
    }

    /// Gives `amount` tokens back to the bucket (never before now).
    pub async fn refund_gcra(&self, key: &str, r: &Rate, amount: u64) -> Result<Decision, Error> {
        self.send(gcra::refund_gcra(key, r, amount)).await
    }

    /// Counts one call against several limits, all or nothing (`RATELIMIT.HITALL`).
    pub async fn hit_all(&self, limits: &[Limit], o: &AllOptions) -> Result<MultiDecision, Error> {
        self.send(window::hit_all(limits, o)).await
    }

    /// Decides a request's limits together, its estimated tokens on the token keys, and reserves
    /// them (`HITALL ... TOKENS ... RESERVE`).
    pub async fn reserve_all(&self, limits: &[Limit], o: &AllOptions) -> Result<MultiReservation, Error> {
        self.send(window::reserve_all(limits, o)).await
    }

    /// Settles a reservation with what was used (`RATELIMIT.SETTLE`), at most once: settled
    /// again (a retry), it changes nothing and answers what the first applied.
    pub async fn settle(&self, r: &Reservation, used: u64) -> Result<Settlement, Error> {
        self.send(settle::settle(r, used)).await
    }

    /// Settles a [`reserve_all`](Limiter::reserve_all) reservation: one settlement per token key.
    pub async fn settle_all(&self, r: &MultiReservation, used: u64) -> Result<Vec<Settlement>, Error> {
        self.send(settle::settle_all(r, used)).await
    }

    /// Takes one of at most `limit` permits in flight for `lease`, under `id` (`None`: a new one;
    /// a retry with the same id is counted once).
    pub async fn acquire(
        &self,
        key: &str,
        limit: u64,
        lease: Duration,
        id: Option<&str>,
    ) -> Result<Acquisition, Error> {
        self.send(lease::acquire(key, limit, lease, id)).await
    }

    /// Gives back the permit under `id`; false if it was not live.
    pub async fn release(&self, key: &str, id: &str) -> Result<bool, Error> {
        self.send(lease::release(key, id)).await
    }

    /// Extends the live lease under `id` to `lease` from now; `None` when it was lost.
    pub async fn renew(&self, key: &str, id: &str, lease: Duration) -> Result<Option<Duration>, Error> {
        self.send(lease::renew(key, id, lease)).await
    }

    /// `RATELIMIT.TOP` (the module only) on the node the transport reaches first.
    pub async fn top(&self, o: &TopOptions) -> Result<Vec<TopEntry>, Error> {
        self.send(top::top(o)).await
    }
}

fn has_library(listing: &Reply) -> bool {
    listing
        .as_array()
        .unwrap_or_default()
        .iter()
        .any(|entry| entry.field("library_name").and_then(Reply::as_text) == Some(LIBRARY_NAME))
}
