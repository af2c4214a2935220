//! A permit: one of a fleet-wide limit of leases, renewed while held, given back when dropped.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{Error, Limiter, Transport};

/// A held lease (`RATELIMIT.ACQUIRE`), renewed in the background every third of its lease while
/// held, released by [`Permit::release`] or on drop (a task spawned on the runtime: a drop never
/// blocks). If a renewal finds the lease gone (it ran out while the server was out of reach, or a
/// failover lost it), [`Permit::lost`] resolves and [`Permit::is_lost`] says so.
#[derive(Debug)]
pub struct Permit<T: Transport> {
    limiter: Limiter<T>,
    key: String,
    id: String,
    renewals: JoinHandle<()>,
    lost: watch::Receiver<bool>,
    released: bool,
}

impl<T: Transport> Limiter<T> {
    /// Takes one of at most `limit` permits of `key` for `lease`, renewed while the permit is
    /// held; [`Error::PermitUnavailable`] when every one is in use. Needs a tokio runtime.
    pub async fn hold(&self, key: &str, limit: u64, lease: Duration) -> Result<Permit<T>, Error> {
        let held = self.acquire(key, limit, lease, None).await?;
        let Some(id) = held.id.filter(|_| held.acquired) else {
            return Err(Error::PermitUnavailable { in_use: held.in_use, limit: limit as i64, wait: held.wait });
        };
        let (report, lost) = watch::channel(false);
        let renewals = tokio::spawn(renew(self.clone(), key.to_string(), id.clone(), lease, report));
        Ok(Permit { limiter: self.clone(), key: key.to_string(), id, renewals, lost, released: false })
    }
}

async fn renew<T: Transport>(limiter: Limiter<T>, key: String, id: String, lease: Duration, lost: watch::Sender<bool>) {
    let every = (lease / 3).max(Duration::from_millis(1));
    loop {
        tokio::time::sleep(every).await;
        // An error (the server out of reach) is tried again at the next tick, while the lease runs.
        if let Ok(None) = limiter.renew(&key, &id, lease).await {
            let _ = lost.send(true);
            return;
        }
    }
}

impl<T: Transport> Permit<T> {
    /// The lease's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether a renewal found the lease gone.
    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// Resolves when a renewal finds the lease gone (never while it is held).
    pub async fn lost(&mut self) {
        let _ = self.lost.wait_for(|lost| *lost).await;
    }

    /// Gives the permit back now; false if it was not live any more.
    pub async fn release(mut self) -> Result<bool, Error> {
        self.released = true;
        self.renewals.abort();
        self.limiter.release(&self.key, &self.id).await
    }
}

impl<T: Transport> Drop for Permit<T> {
    fn drop(&mut self) {
        self.renewals.abort();
        if self.released {
            return;
        }
        // Outside a runtime, the lease runs out on its own.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (limiter, key, id) =
                (self.limiter.clone(), std::mem::take(&mut self.key), std::mem::take(&mut self.id));
            runtime.spawn(async move {
                let _ = limiter.release(&key, &id).await;
            });
        }
    }
}
