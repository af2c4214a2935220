//! A rule: a limit on the requests it matches, per identity, counted when the request comes in,
//! or from its response.

use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{Method, StatusCode};

use super::key::KeyExtractor;
use crate::limits::{Fixed, Rate, Sliding};

/// What a rule limits with.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Fixed(Fixed),
    Sliding(Sliding),
    Gcra(Rate),
    /// Several fixed windows, all or nothing (HITALL).
    AllOf(Vec<Fixed>),
    /// At most `limit` requests in flight, each holding a permit until its response body ends.
    InFlight {
        limit: u64,
        lease: Duration,
    },
}

/// A request's cost, read from its head.
pub(crate) type Cost = Arc<dyn Fn(&Parts) -> u64 + Send + Sync>;

/// What a response says was used.
pub(crate) type Used = Arc<dyn Fn(&http::response::Parts) -> Option<u64> + Send + Sync>;

/// When a rule counts a request.
#[derive(Clone)]
pub(crate) enum Counting {
    /// When it comes in.
    OnRequest,
    /// After its response, only when `counts` says so (failed logins); a key already at its
    /// limit is refused when the request comes in (PEEK).
    Responses(Arc<dyn Fn(StatusCode) -> bool + Send + Sync>),
    /// The cost reserved when it comes in, settled with what the response says was used.
    Settled(Used),
}

/// A limit on the requests whose path matches a glob and whose method is listed (all of them
/// unless [`Rule::path`] and [`Rule::methods`] say otherwise), per identity (the layer's key
/// extractor, or the rule's own). Its Redis keys are `<prefix>{<name>:<identity>}`, as the
/// Python, Node, Go and Java middlewares make them, so that services in every language share it.
///
/// ```
/// use std::time::Duration;
/// use http::{Method, StatusCode};
/// use redis_ratelimit_client::layer::{Header, Rule};
/// use redis_ratelimit_client::Fixed;
///
/// let minute = Duration::from_secs(60);
/// let rules = [
///     Rule::fixed(100, minute),
///     Rule::sliding(10, Duration::from_secs(1)).path("/api/*").name("api"),
///     Rule::fixed(5, minute).path("/login").methods([Method::POST]).name("logins")
///         .count_when(|status| status == StatusCode::UNAUTHORIZED),
///     Rule::all_of([Fixed::new(10, Duration::from_secs(1)), Fixed::new(1000, Duration::from_secs(3600))])
///         .name("burst-and-hour").key(Header(http::HeaderName::from_static("x-api-key"))),
/// ];
/// # let _ = rules;
/// ```
#[derive(Clone)]
pub struct Rule {
    pub(crate) kind: Kind,
    pub(crate) name: String,
    path: Option<String>,
    methods: Option<Vec<Method>>,
    pub(crate) key: Option<Arc<dyn KeyExtractor>>,
    pub(crate) cost: Option<Cost>,
    pub(crate) counting: Counting,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule").field("name", &self.name).field("kind", &self.kind).field("path", &self.path).finish()
    }
}

impl Rule {
    fn of(kind: Kind) -> Rule {
        Rule {
            kind,
            name: "default".to_string(),
            path: None,
            methods: None,
            key: None,
            cost: None,
            counting: Counting::OnRequest,
        }
    }

    /// `limit` requests per fixed `window` (RATELIMIT.HIT).
    pub fn fixed(limit: u64, window: Duration) -> Rule {
        Rule::of(Kind::Fixed(Fixed::new(limit, window)))
    }

    /// A fixed window of any shape: a calendar window, aligned, a cost.
    pub fn fixed_window(limit: Fixed) -> Rule {
        Rule::of(Kind::Fixed(limit))
    }

    /// `limit` requests per sliding `window` (RATELIMIT.SLIDE).
    pub fn sliding(limit: u64, window: Duration) -> Rule {
        Rule::of(Kind::Sliding(Sliding::new(limit, window)))
    }

    /// A GCRA bucket (RATELIMIT.GCRA).
    pub fn gcra(rate: Rate) -> Rule {
        Rule::of(Kind::Gcra(rate))
    }

    /// Several fixed windows, all or nothing (RATELIMIT.HITALL); named `<name>-0`, `<name>-1`...
    /// in the headers, their keys `<prefix>{<name>:<identity>}:0`, `:1`...
    pub fn all_of(limits: impl IntoIterator<Item = Fixed>) -> Rule {
        Rule::of(Kind::AllOf(limits.into_iter().collect()))
    }

    /// At most `limit` requests in flight across the fleet (RATELIMIT.ACQUIRE), each holding a
    /// permit (a lease of `lease`, renewed while held) until its response body ends, not when
    /// the handler returns: a streamed response holds it while it streams.
    pub fn in_flight(limit: u64, lease: Duration) -> Rule {
        Rule::of(Kind::InFlight { limit, lease })
    }

    /// The limit's name, in the headers and its keys (`default` unless named).
    pub fn name(mut self, name: impl Into<String>) -> Rule {
        self.name = name.into();
        self
    }

    /// Only the requests whose path matches `glob` (`*` matches any run of characters).
    pub fn path(mut self, glob: impl Into<String>) -> Rule {
        self.path = Some(glob.into());
        self
    }

    /// Only the requests of these methods.
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Rule {
        self.methods = Some(methods.into_iter().collect());
        self
    }

    /// The rule's own identity for a request, instead of the layer's.
    pub fn key(mut self, key: impl KeyExtractor) -> Rule {
        self.key = Some(Arc::new(key));
        self
    }

    /// What a request costs (at least 1), read from its head (a batch's size, say).
    pub fn cost(mut self, cost: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Rule {
        self.cost = Some(Arc::new(cost));
        self
    }

    /// Counts a request only when its response's status satisfies `counts` (failed logins:
    /// `|s| s == StatusCode::UNAUTHORIZED`); an identity already at its limit is refused when the
    /// request comes in. Fixed and sliding windows.
    pub fn count_when(mut self, counts: impl Fn(StatusCode) -> bool + Send + Sync + 'static) -> Rule {
        self.counting = Counting::Responses(Arc::new(counts));
        self
    }

    /// Reserves the request's cost (an estimate: [`Rule::cost`]) when it comes in, and settles it
    /// with what `used` reads from the response (tokens an LLM call used, say, from a header);
    /// `None` leaves the estimate counted.
    pub fn settle_from(mut self, used: impl Fn(&http::response::Parts) -> Option<u64> + Send + Sync + 'static) -> Rule {
        self.counting = Counting::Settled(Arc::new(used));
        self
    }

    /// Refuses, at start-up, a rule whose limit the module would refuse, or whose counting its
    /// limit cannot do.
    pub(crate) fn check(&self) {
        let refused = match &self.kind {
            Kind::Fixed(f) => crate::command::window::hit("k", f).err(),
            Kind::Sliding(s) => crate::command::window::slide("k", s).err(),
            Kind::Gcra(r) => crate::command::gcra::gcra("k", r).err(),
            Kind::AllOf(limits) => {
                let keyed: Vec<crate::Limit> = limits
                    .iter()
                    .enumerate()
                    .map(|(i, f)| crate::Limit::new(i.to_string(), f.limit(), f.window()))
                    .collect();
                crate::command::window::hit_all(&keyed, &crate::AllOptions::new()).err()
            }
            Kind::InFlight { limit, lease } => crate::command::lease::acquire("k", *limit, *lease, None).err(),
        };
        if let Some(e) = refused {
            panic!("rule {:?}: {e}", self.name);
        }
        let counted = matches!(self.kind, Kind::Fixed(_) | Kind::Sliding(_));
        if matches!(self.counting, Counting::Responses(_)) && !counted {
            panic!("rule {:?}: count_when needs a fixed or sliding window", self.name);
        }
        let reserved = counted || matches!(self.kind, Kind::Gcra(_));
        if matches!(self.counting, Counting::Settled(_)) && !reserved {
            panic!("rule {:?}: settle_from needs a fixed or sliding window or a GCRA bucket", self.name);
        }
    }

    pub(crate) fn matches(&self, parts: &Parts) -> bool {
        self.methods.as_ref().is_none_or(|methods| methods.contains(&parts.method))
            && self.path.as_deref().is_none_or(|glob| glob_matches(glob.as_bytes(), parts.uri.path().as_bytes()))
    }

    /// A request's cost under this rule.
    pub(crate) fn cost_of(&self, parts: &Parts) -> u64 {
        self.cost.as_ref().map_or(1, |cost| cost(parts))
    }
}

/// Whether `text` matches `glob`, whose `*` matches any run of characters.
fn glob_matches(glob: &[u8], text: &[u8]) -> bool {
    match glob.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| glob_matches(rest, &text[skip..])),
        Some((c, rest)) => text.first() == Some(c) && glob_matches(rest, &text[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::glob_matches;

    #[test]
    fn globs() {
        assert!(glob_matches(b"/api/*", b"/api/users/1"));
        assert!(glob_matches(b"/api/*/x", b"/api/a/x"));
        assert!(!glob_matches(b"/api/*", b"/apix"));
        assert!(glob_matches(b"/login", b"/login"));
        assert!(!glob_matches(b"/login", b"/login/x"));
    }
}
