//! What the limiter commands answer, as typed values, and the HTTP headers an answer gives.

use std::time::Duration;

/// A wait or a reset that never comes: a cost above the limit, or a counter without TTL (PEEK).
pub const FOREVER: Duration = Duration::MAX;

/// One limit's answer (HIT, SLIDE, PEEK, GCRA, and each limit of HITALL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Admitted (PEEK: would be).
    pub allowed: bool,
    /// The counter after the call (SLIDE: the estimate, rounded up; GCRA: tokens in use).
    pub count: i64,
    /// What is left before the limit.
    pub remaining: i64,
    /// The quota (GCRA: the capacity, `max_burst + 1`).
    pub limit: i64,
    /// How long until the window ends (SLIDE: until the estimate is 0; GCRA: until the bucket is
    /// full); zero when nothing is counted; [`FOREVER`] for a counter without TTL (PEEK).
    pub reset_after: Duration,
    /// `None` when allowed; else how long until the same call would be admitted if nothing else
    /// happened ([`FOREVER`]: never, the cost is above the limit).
    pub retry_after: Option<Duration>,
    /// The window (GCRA: the period); `None` where the call names none (PEEK) or it varies (a
    /// calendar window).
    pub window: Option<Duration>,
}

impl Decision {
    /// `RateLimit-Policy` and `RateLimit` (the IETF draft's fields) under `name`, and
    /// `Retry-After` when denied (RFC 9110), in whole seconds rounded up.
    pub fn headers(&self, name: &str) -> Vec<(&'static str, String)> {
        combined_headers(&[(name, *self)], None)
    }
}

/// HITALL's answer: one decision for several limits, all or nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultiDecision {
    /// Admitted by every limit.
    pub allowed: bool,
    /// Each limit's own answer, in the order given (`allowed` there: whether that limit alone
    /// would admit the call).
    pub decisions: Vec<Decision>,
}

impl MultiDecision {
    /// `None` when allowed; else when every limit that said no admits the call again.
    pub fn retry_after(&self) -> Option<Duration> {
        if self.allowed {
            return None;
        }
        self.decisions.iter().filter_map(|d| d.retry_after).max()
    }

    /// The most restrictive limit: the fewest remaining, then the latest reset.
    pub fn tightest(&self) -> Option<&Decision> {
        self.decisions.iter().min_by_key(|d| tightness(d))
    }
}

/// An answer with PARTIAL (`*_up_to`): the decision and what was granted, at least 1 when
/// allowed, 0 when not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Grant {
    /// The decision.
    pub decision: Decision,
    /// What was counted.
    pub granted: i64,
}

/// An answer with RESERVE: the decision, and the reservation to settle with what was used.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reservation {
    /// The decision.
    pub decision: Decision,
    pub(crate) key: String,
    pub(crate) token: Option<String>,
    /// What was reserved: the call's cost or tokens (with `*_up_to`, what was granted).
    pub amount: i64,
}

impl Reservation {
    /// Whether the call was admitted, so that there is a reservation to settle.
    pub fn is_reserved(&self) -> bool {
        self.token.is_some()
    }

    /// The key it was made on.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The reservation as the server made it: opaque, for its key only, settled at most once.
    /// Keep it (a queue, a database) to settle from another process.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// A reservation kept as its key, token and amount, to settle in another process.
    pub fn from_parts(
        key: impl Into<String>,
        token: impl Into<String>,
        amount: i64,
        decision: Decision,
    ) -> Reservation {
        Reservation { decision, key: key.into(), token: Some(token.into()), amount }
    }
}

/// HITALL's answer with TOKENS and RESERVE: every limit decided, and one reservation of the
/// token keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultiReservation {
    /// The decisions.
    pub decision: MultiDecision,
    pub(crate) keys: Vec<String>,
    pub(crate) token: Option<String>,
    /// The tokens reserved.
    pub amount: i64,
}

impl MultiReservation {
    /// The token keys, in order: what the reservation is settled on.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The reservation as the server made it (`None` when denied).
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }
}

/// SETTLE's answer for one key: its limit after the settle, and what was applied (negative:
/// given back; positive: charged beyond the reservation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Settlement {
    /// The key's limit after the settle.
    pub decision: Decision,
    /// What was applied.
    pub applied: i64,
}

/// ACQUIRE's answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Acquisition {
    /// A permit was taken.
    pub acquired: bool,
    /// Permits held now.
    pub in_use: i64,
    /// How many more may be taken now.
    pub remaining: i64,
    /// The lease when acquired; when denied, how long until the earliest lease ends.
    pub wait: Duration,
    /// The lease's id (`None` when denied): RELEASE and RENEW take it.
    pub id: Option<String>,
}

/// One key of `RATELIMIT.TOP`: its count over the covered span, at most `error` too many.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopEntry {
    /// The key.
    pub key: String,
    /// Its count.
    pub count: i64,
    /// The count's error bound.
    pub error: i64,
}

/// Seconds rounded up, as headers carry them (a client that waits that long is admitted).
pub(crate) fn whole_seconds(d: Duration) -> u64 {
    let secs = d.as_secs();
    if d.subsec_nanos() > 0 {
        secs.saturating_add(1)
    } else {
        secs
    }
}

fn tightness(d: &Decision) -> (i64, std::cmp::Reverse<Duration>) {
    (d.remaining, std::cmp::Reverse(d.reset_after))
}

fn policy(name: &str, d: &Decision) -> String {
    match d.window {
        Some(w) => format!("\"{name}\";q={};w={}", d.limit, whole_seconds(w).max(1)),
        None => format!("\"{name}\";q={}", d.limit),
    }
}

/// The limit `RateLimit` names: the tightest (fewest remaining, then the latest reset) of those
/// that refused, when one did; else of all.
pub(crate) fn current<'a, 'n>(named: &'a [(&'n str, Decision)]) -> Option<&'a (&'n str, Decision)> {
    let refusing = named.iter().filter(|(_, d)| !d.allowed);
    refusing.min_by_key(|(_, d)| tightness(d)).or_else(|| named.iter().min_by_key(|(_, d)| tightness(d)))
}

/// The headers for several limits on one request, as every client of this project writes them:
/// each limit in `RateLimit-Policy`; the tightest in `RateLimit` (of those that refused, when one
/// did); `Retry-After` when one refused (`retry_after`, else the largest of the refusals': when all
/// of them admit again), unless that is never.
pub fn combined_headers(named: &[(&str, Decision)], retry_after: Option<Duration>) -> Vec<(&'static str, String)> {
    let Some(first) = named.first() else {
        return Vec::new();
    };
    let (name, decision) = current(named).unwrap_or(first);
    let policies: Vec<String> = named.iter().map(|(n, d)| policy(n, d)).collect();
    let reset = whole_seconds(decision.reset_after.min(Duration::from_secs(1 << 31)));
    let mut headers = vec![
        ("RateLimit-Policy", policies.join(", ")),
        ("RateLimit", format!("\"{name}\";r={};t={reset}", decision.remaining)),
    ];
    let retry = retry_after.or_else(|| named.iter().filter_map(|(_, d)| d.retry_after).max());
    if let Some(retry) = retry.filter(|r| *r != FOREVER) {
        headers.push(("Retry-After", whole_seconds(retry).to_string()));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(allowed: bool, remaining: i64, reset_s: u64) -> Decision {
        Decision {
            allowed,
            count: 10 - remaining,
            remaining,
            limit: 10,
            reset_after: Duration::from_millis(reset_s * 1000 - 1),
            retry_after: (!allowed).then(|| Duration::from_millis(reset_s * 1000 - 1)),
            window: Some(Duration::from_secs(60)),
        }
    }

    #[test]
    fn headers_as_the_other_clients_write_them() {
        let headers = combined_headers(&[("a", decision(true, 3, 20)), ("b", decision(false, 0, 30))], None);
        assert_eq!(
            headers,
            vec![
                ("RateLimit-Policy", "\"a\";q=10;w=60, \"b\";q=10;w=60".to_string()),
                ("RateLimit", "\"b\";r=0;t=30".to_string()),
                ("Retry-After", "30".to_string()),
            ]
        );
        let never = Decision { retry_after: Some(FOREVER), ..decision(false, 0, 5) };
        assert_eq!(never.headers("x").len(), 2, "no Retry-After for never");
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::ZERO), 0);
    }
}

/// What a report taught an adaptive limit (`RATELIMIT.REPORT`'s answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Learned {
    /// The fleet's limit per window now.
    pub limit: i64,
    /// This report cut it (the first throttle of its epoch).
    pub decreased: bool,
    /// How long until any caller is admitted again (a provider's Retry-After); zero when not held.
    pub hold: Duration,
}
