//! The limits a call is made against: built with their constructors, checked when the call is
//! built (before any round trip), sent as the module takes them.

use std::time::Duration;

/// A calendar window: it ends at the next midnight, Monday, 1st or January 1st, in the limit's
/// time zone (UTC unless [`Fixed::in_zone`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Calendar {
    /// Until the next midnight.
    Day,
    /// An ISO week: until the next Monday's midnight.
    Week,
    /// Until the 1st of the next month.
    Month,
    /// Until the next January 1st.
    Year,
}

impl Calendar {
    /// The unit as the command takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Calendar::Day => "day",
            Calendar::Week => "week",
            Calendar::Month => "month",
            Calendar::Year => "year",
        }
    }
}

/// A fixed window's span: a length, or a calendar unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Window {
    /// A length in whole milliseconds, from the window's first hit (or, aligned, at multiples of
    /// it since the Unix epoch).
    Length(Duration),
    /// A calendar unit.
    Calendar(Calendar),
}

impl From<Duration> for Window {
    fn from(length: Duration) -> Window {
        Window::Length(length)
    }
}

impl From<Calendar> for Window {
    fn from(unit: Calendar) -> Window {
        Window::Calendar(unit)
    }
}

/// A fixed-window limit (`RATELIMIT.HIT`): `limit` per window.
///
/// ```
/// use std::time::Duration;
/// use redis_ratelimit_client::{Calendar, Fixed};
///
/// let per_minute = Fixed::new(100, Duration::from_secs(60));
/// let per_day_in_paris = Fixed::new(10_000, Calendar::Day).in_zone("Europe/Paris");
/// let heavy = per_minute.clone().with_cost(5);
/// # let _ = (per_day_in_paris, heavy);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fixed {
    pub(crate) limit: u64,
    pub(crate) window: Window,
    pub(crate) cost: u64,
    pub(crate) align: bool,
    pub(crate) tz: Option<String>,
}

impl Fixed {
    /// `limit` per `window` (a [`Duration`] or a [`Calendar`] unit), each call costing 1.
    pub fn new(limit: u64, window: impl Into<Window>) -> Fixed {
        Fixed { limit, window: window.into(), cost: 1, align: false, tz: None }
    }

    /// Each call counts `cost` (at least 1).
    pub fn with_cost(mut self, cost: u64) -> Fixed {
        self.cost = cost;
        self
    }

    /// Windows at multiples of the length since the Unix epoch, the same for every key (ALIGN).
    pub fn aligned(mut self) -> Fixed {
        self.align = true;
        self
    }

    /// A calendar window's time zone: `UTC`, an offset such as `+05:30`, or an IANA name (the
    /// module only).
    pub fn in_zone(mut self, tz: impl Into<String>) -> Fixed {
        self.tz = Some(tz.into());
        self
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window.
    pub fn window(&self) -> Window {
        self.window
    }

    /// What one call counts.
    pub fn cost(&self) -> u64 {
        self.cost
    }
}

/// A sliding-window limit (`RATELIMIT.SLIDE`): `limit` per window, the previous window weighed
/// by its overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sliding {
    pub(crate) limit: u64,
    pub(crate) window: Duration,
    pub(crate) cost: u64,
}

impl Sliding {
    /// `limit` per sliding `window`, each call costing 1.
    pub fn new(limit: u64, window: Duration) -> Sliding {
        Sliding { limit, window, cost: 1 }
    }

    /// Each call counts `cost` (at least 1).
    pub fn with_cost(mut self, cost: u64) -> Sliding {
        self.cost = cost;
        self
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// What one call counts.
    pub fn cost(&self) -> u64 {
        self.cost
    }
}

/// A GCRA bucket (`RATELIMIT.GCRA`): a burst of `max_burst + 1`, then `per_period` tokens every
/// `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    pub(crate) max_burst: u64,
    pub(crate) per_period: u64,
    pub(crate) period: Duration,
    pub(crate) tokens: u64,
    pub(crate) align: bool,
}

impl Rate {
    /// A burst of `max_burst + 1`, then `per_period` tokens every `period`; each call takes 1.
    pub fn new(max_burst: u64, per_period: u64, period: Duration) -> Rate {
        Rate { max_burst, per_period, period, tokens: 1, align: false }
    }

    /// Each call takes `tokens` (at least 1).
    pub fn with_tokens(mut self, tokens: u64) -> Rate {
        self.tokens = tokens;
        self
    }

    /// The tokens come back `per_period` at once at each multiple of `period` since the Unix
    /// epoch (Spring Cloud Gateway's bucket). Not with a reservation.
    pub fn aligned(mut self) -> Rate {
        self.align = true;
        self
    }

    /// The bucket's capacity, `max_burst + 1`.
    pub fn capacity(&self) -> u64 {
        self.max_burst.saturating_add(1)
    }

    /// What one call takes.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }
}

/// One key's limit in [`Limiter::hit_all`](crate::Limiter::hit_all).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Limit {
    pub(crate) key: String,
    pub(crate) limit: u64,
    pub(crate) window: Window,
}

impl Limit {
    /// `limit` per `window` on `key`.
    pub fn new(key: impl Into<String>, limit: u64, window: impl Into<Window>) -> Limit {
        Limit { key: key.into(), limit, window: window.into() }
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }
}

/// `RATELIMIT.HITALL`'s options.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllOptions {
    pub(crate) cost: u64,
    pub(crate) sliding: bool,
    pub(crate) align: bool,
    pub(crate) tz: Option<String>,
    pub(crate) tokens: Option<(u64, usize)>,
}

impl Default for AllOptions {
    fn default() -> AllOptions {
        AllOptions { cost: 1, sliding: false, align: false, tz: None, tokens: None }
    }
}

impl AllOptions {
    /// Fixed windows, each call costing 1.
    pub fn new() -> AllOptions {
        AllOptions::default()
    }

    /// Each limit counts `cost` (at least 1).
    pub fn with_cost(mut self, cost: u64) -> AllOptions {
        self.cost = cost;
        self
    }

    /// Sliding windows instead of fixed ones.
    pub fn sliding(mut self) -> AllOptions {
        self.sliding = true;
        self
    }

    /// Fixed windows at multiples of their lengths since the epoch.
    pub fn aligned(mut self) -> AllOptions {
        self.align = true;
        self
    }

    /// The calendar windows' time zone.
    pub fn in_zone(mut self, tz: impl Into<String>) -> AllOptions {
        self.tz = Some(tz.into());
        self
    }

    /// `tokens` counted on the last `keys` limits instead of the cost (LLM tokens beside a
    /// request count).
    pub fn with_tokens(mut self, tokens: u64, keys: usize) -> AllOptions {
        self.tokens = Some((tokens, keys));
        self
    }
}

/// Which of `RATELIMIT.TOP`'s views to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TopView {
    /// The keys denied most.
    #[default]
    Denied,
    /// The keys admitted the most cost for.
    Admitted,
    /// The keys shadow mode would have denied most.
    Shadowed,
}

/// `RATELIMIT.TOP`'s options: the view, how many keys (the server's default when `None`), and
/// whether to reset the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TopOptions {
    /// The view.
    pub view: TopView,
    /// How many keys.
    pub count: Option<u64>,
    /// Reset the view's counts after reading them.
    pub reset: bool,
}

/// An adaptive limit's terms (`RATELIMIT.ADAPT`): a limit per `window` that the fleet learns from
/// its provider's answers, between `floor` and `ceiling`, a new key starting at `start`; each call
/// takes `cost` (1 unless [`with_cost`](Adaptive::with_cost)). See the repository's
/// docs/adaptive.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Adaptive {
    pub(crate) floor: u64,
    pub(crate) start: u64,
    pub(crate) ceiling: u64,
    pub(crate) window: Duration,
    pub(crate) cost: u64,
    pub(crate) turn: bool,
}

impl Adaptive {
    /// Between `floor` and `ceiling` per `window`, starting at `start`.
    pub fn new(floor: u64, start: u64, ceiling: u64, window: Duration) -> Adaptive {
        Adaptive { floor, start, ceiling, window, cost: 1, turn: false }
    }

    /// Each call takes `cost` (at least 1): an LLM call's tokens, say.
    pub fn with_cost(mut self, cost: u64) -> Adaptive {
        self.cost = cost;
        self
    }

    /// The call is asked again at the `retry_after` a denial told it (`TURN`): it is then admitted
    /// on a bucket not in debt, so that no one who was not waiting takes its turn.
    pub fn at_turn(mut self) -> Adaptive {
        self.turn = true;
        self
    }
}

/// How the provider answered a call (`RATELIMIT.REPORT`): [`Report::ok`] or
/// [`Report::throttled`], with the provider's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Report {
    pub(crate) throttled: bool,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) limit: Option<u64>,
    pub(crate) remaining: Option<(u64, Duration)>,
    pub(crate) age: Option<Duration>,
}

impl Report {
    /// The provider answered.
    pub fn ok() -> Report {
        Report { throttled: false, retry_after: None, limit: None, remaining: None, age: None }
    }

    /// The provider throttled the call: a 429, a 503, or a timeout counted as one.
    pub fn throttled() -> Report {
        Report { throttled: true, ..Report::ok() }
    }

    /// The provider's Retry-After (only with [`Report::throttled`]): the whole fleet waits until then.
    pub fn with_retry_after(mut self, wait: Duration) -> Report {
        self.retry_after = Some(wait);
        self
    }

    /// The provider's stated limit per window: it caps the learned one.
    pub fn with_limit(mut self, limit: u64) -> Report {
        self.limit = Some(limit);
        self
    }

    /// What the provider says remains, and when it resets: the fleet takes no more until then.
    pub fn with_remaining(mut self, remaining: u64, reset_after: Duration) -> Report {
        self.remaining = Some((remaining, reset_after));
        self
    }

    /// How long ago the call was decided (`AGE`; an [`Instant`](std::time::Instant)'s
    /// `elapsed()` since its decision): where the provider states no remaining, a throttle on a
    /// call decided after the epoch's cut cuts again, where the burst before the cut cuts once.
    pub fn with_age(mut self, age: Duration) -> Report {
        self.age = Some(age);
        self
    }
}
