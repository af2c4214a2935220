//! Argument parsing for every command, free of Redis types so that each rule is unit-tested here
//! and the command glue only moves bytes in and errors out: a file per command family (fixed and
//! sliding windows, GCRA, leases, reservations, walks, TOP), the readers they share in `read`, the
//! errors in `error`. The property tests and the check against the docs stay here, over them all.

mod adaptive;
#[cfg(test)]
mod conformance;
mod error;
mod gcra;
mod lease;
mod read;
mod reserve;
#[cfg(test)]
mod testing;
mod top;
mod walk;
mod window;

#[cfg_attr(test, allow(unused_imports))]
pub use adaptive::{parse_adapt, parse_report};
pub use error::ArgError;
pub use gcra::{parse_cl_throttle, parse_gcra};
pub use lease::{parse_acquire, parse_release, parse_renew};
pub use reserve::parse_settle;
pub use top::parse_top;
// (The commands, which name WalkArgs, are compiled out of unit tests.)
#[cfg_attr(test, allow(unused_imports))]
pub use walk::{parse_audit, parse_repair, WalkArgs};
pub use window::{parse_hit, parse_hitall, parse_peek, parse_slide};

// What the property tests and the docs check below name besides the parsers.
#[cfg(test)]
use crate::core::calendar::Window;
#[cfg(test)]
use crate::core::window::{Limit, MAX_WINDOW_MS};
#[cfg(test)]
use {gcra::GcraArgs, read::MAX_ID_LEN};

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    /// 2023-11-14T22:13:20Z.
    const NOW: i64 = 1_700_000_000_000;

    fn word() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::sample::select(vec![
                "COST",
                "cost",
                "MS",
                "ms",
                "LIMIT",
                "TOKENS",
                "0",
                "1",
                "-1",
                "60",
                "0.5",
                "",
                "+1",
                "01",
                "ALIGN",
                "TZ",
                "day",
                "Month",
                "UTC",
                "+05:30",
                "Europe/Paris",
                "SLIDE",
                "RESERVE"
            ])
            .prop_map(|w| w.as_bytes().to_vec()),
            any::<i64>().prop_map(|n| n.to_string().into_bytes()),
            prop::collection::vec(any::<u8>(), 0..24),
        ]
    }

    proptest! {
        #[test]
        fn parsers_never_panic_and_only_accept_valid_values(words in prop::collection::vec(word(), 0..8)) {
            let words = || words.iter().map(Vec::as_slice);
            if let Ok(a) = parse_hit(words()) {
                prop_assert!(a.limit >= 1 && a.cost != 0 && (!a.reserve || a.cost >= 1));
                prop_assert!(!a.reserve || matches!(a.window, Window::Rolling(_)));
                prop_assert!(a.at(NOW).is_ok_and(|l| (1..=MAX_WINDOW_MS).contains(&l.window_ms)));
            }
            if let Ok(a) = parse_settle(words()) {
                prop_assert!(a.used >= 0);
            }
            if let Ok(a) = parse_repair(words(), 100) {
                let window = a.repair_window_ms.expect("REPAIR has a window");
                prop_assert!((1..=MAX_WINDOW_MS).contains(&window));
            }
            if let Ok(a) = parse_audit(words(), 100) {
                prop_assert!(a.repair_window_ms.is_none());
            }
            if let Ok(a) = parse_peek(words()) {
                prop_assert!(a.limit >= 1 && a.cost >= 1);
            }
            // SLIDE reads HIT's arguments as HIT does; PEEK is its one more option.
            if let Ok(a) = parse_slide(words()) {
                let without_peek = words().filter(|w| !w.eq_ignore_ascii_case(b"PEEK"));
                let hit = parse_hit(without_peek).map(|h| (h.at(0), h.partial, h.reserve));
                prop_assert_eq!(hit, Ok((Ok(a.limit), a.partial, a.reserve)));
            }
            if let Ok(GcraArgs { rate: r, reserve, .. }) = parse_gcra(words()) {
                prop_assert!(r.capacity >= 1 && r.emission_ns >= 1 && r.tokens != 0 && (!reserve || r.tokens >= 1));
                prop_assert_eq!(r.tolerance_ns, r.emission_ns * r.capacity);
                prop_assert_eq!(r.increment_ns, r.emission_ns * r.tokens);
            }
            if let Ok(a) = parse_acquire(words()) {
                prop_assert!(a.limit >= 1 && (1..=MAX_WINDOW_MS).contains(&a.lease_ms));
                prop_assert!(a.id.is_none_or(|id| (1..=MAX_ID_LEN).contains(&id.len())));
            }
            if let Ok((id, lease)) = parse_renew(words()) {
                prop_assert!((1..=MAX_ID_LEN).contains(&id.len()) && (1..=MAX_WINDOW_MS).contains(&lease));
            }
            if let Ok(id) = parse_release(words()) {
                prop_assert!((1..=MAX_ID_LEN).contains(&id.len()));
            }
            if let Ok(r) = parse_cl_throttle(words()) {
                prop_assert!(r.capacity >= 1 && r.emission_ns >= 1);
            }
            if let Ok(a) = parse_hitall(words()) {
                prop_assert!(!a.keys.is_empty() && a.keys.len() == a.limits.len() && a.cost >= 1);
                let limits = a.at(NOW).unwrap();
                prop_assert!(limits.iter().all(|l| l.limit >= 1 && (1..=MAX_WINDOW_MS).contains(&l.window_ms)));
            }
            let errors = [
                parse_hit(words()).err(),
                parse_audit(words(), 100).err(),
                parse_repair(words(), 100).err(),
                parse_peek(words()).err(),
                parse_slide(words()).err(),
                parse_acquire(words()).err(),
                parse_release(words()).err(),
                parse_renew(words()).err(),
                parse_hitall(words()).err(),
                parse_gcra(words()).err(),
                parse_cl_throttle(words()).err(),
                parse_settle(words()).err(),
            ];
            for e in errors.into_iter().flatten() {
                prop_assert!(e.message().starts_with("ERR "));
            }
        }

        #[test]
        fn valid_hits_round_trip(limit in 1..=i64::MAX, window in 1..=4_611_686_018_427_387i64, cost in 1..=i64::MAX, ms: bool) {
            let (limit_s, window_s, cost_s) = (limit.to_string(), window.to_string(), cost.to_string());
            let mut line = vec!["k", limit_s.as_str(), window_s.as_str(), "COST", cost_s.as_str()];
            if ms {
                line.push("MS");
            }
            let parsed = parse_hit(line.iter().map(|w| w.as_bytes())).and_then(|a| a.at(0)).unwrap();
            prop_assert_eq!(parsed, Limit { limit, window_ms: if ms { window } else { window * 1000 }, cost });
        }
    }
}

/// The reference in docs/ keeps up with the parsers: every error text a parser gives is in its
/// command's page. The argument vectors are every sequence of up to five words from a vocabulary
/// that reaches each rule (all but those that need more words, such as HITALL's repeated COST,
/// which the pages list too).
#[cfg(test)]
mod docs {
    use std::collections::BTreeSet;

    use super::*;

    const WORDS: &[&str] = &[
        "k",
        "0",
        "-1",
        "1",
        "2",
        "x",
        "1.5",
        "60",
        "COST",
        "MS",
        "LIMIT",
        "TOKENS",
        "9223372036854775807",
        "PEEK",
        "SLIDE",
        "ID",
        "RESERVE",
        "ALIGN",
        "TZ",
        "day",
        "",
    ];

    /// RATELIMIT.TOP's vocabulary: it has no positional arguments, only its own options.
    const TOP_WORDS: &[&str] = &["DENIED", "ADMITTED", "SHADOWED", "COUNT", "RESET", "0", "3", "x", "MS"];

    /// Every error `parse` gives for the vectors of `WORDS`, as its message.
    fn errors(parse: impl Fn(&[&[u8]]) -> Option<ArgError>) -> BTreeSet<String> {
        errors_over(WORDS, parse)
    }

    /// Every error `parse` gives for the vectors of `vocabulary`, as its message.
    fn errors_over(vocabulary: &[&str], parse: impl Fn(&[&[u8]]) -> Option<ArgError>) -> BTreeSet<String> {
        let mut found = BTreeSet::new();
        let mut vector: Vec<usize> = Vec::new();
        loop {
            let words: Vec<&[u8]> = vector.iter().map(|&w| vocabulary[w].as_bytes()).collect();
            if let Some(e) = parse(&words) {
                found.insert(e.message());
            }
            // The next vector, counting in base vocabulary.len() with lengths 0 to 5.
            let mut i = 0;
            loop {
                if i == vector.len() {
                    if vector.len() == 5 {
                        return found;
                    }
                    vector.push(0);
                    break;
                }
                vector[i] += 1;
                if vector[i] < vocabulary.len() {
                    break;
                }
                vector[i] = 0;
                i += 1;
            }
        }
    }

    /// What of `errors` the page does not show, as a line of the test's failure.
    fn missing(command: &str, page: &str, errors: BTreeSet<String>) -> Option<String> {
        assert!(errors.len() >= 2, "{command}: the vectors reach too few errors: {errors:?}");
        let missing: Vec<String> = errors.into_iter().filter(|e| !page.contains(e.as_str())).collect();
        (!missing.is_empty()).then(|| format!("docs/commands/{command}.md lacks {missing:#?}"))
    }

    #[test]
    fn every_parser_error_is_in_its_commands_page() {
        let pages = [
            ("ratelimit.hit", include_str!("../../../docs/commands/ratelimit.hit.md"), 0),
            ("ratelimit.peek", include_str!("../../../docs/commands/ratelimit.peek.md"), 1),
            ("ratelimit.hitall", include_str!("../../../docs/commands/ratelimit.hitall.md"), 2),
            ("ratelimit.gcra", include_str!("../../../docs/commands/ratelimit.gcra.md"), 3),
            ("cl.throttle", include_str!("../../../docs/commands/cl.throttle.md"), 4),
            ("ratelimit.audit", include_str!("../../../docs/commands/ratelimit.audit.md"), 5),
            ("ratelimit.repair", include_str!("../../../docs/commands/ratelimit.repair.md"), 6),
            ("ratelimit.slide", include_str!("../../../docs/commands/ratelimit.slide.md"), 7),
            ("ratelimit.acquire", include_str!("../../../docs/commands/ratelimit.acquire.md"), 8),
            ("ratelimit.release", include_str!("../../../docs/commands/ratelimit.release.md"), 9),
            ("ratelimit.renew", include_str!("../../../docs/commands/ratelimit.renew.md"), 10),
            ("ratelimit.settle", include_str!("../../../docs/commands/ratelimit.settle.md"), 11),
            ("ratelimit.adapt", include_str!("../../../docs/commands/ratelimit.adapt.md"), 12),
            ("ratelimit.report", include_str!("../../../docs/commands/ratelimit.report.md"), 13),
        ];
        let mut lacking = Vec::new();
        for (command, page, which) in pages {
            let found = errors(|words| {
                // The key comes first, as in the calls (the glue passes the arguments after the name).
                let keyed: Vec<&[u8]> = std::iter::once(&b"k"[..]).chain(words.iter().copied()).collect();
                let args = || keyed.iter().copied();
                match which {
                    0 => parse_hit(args()).err(),
                    1 => parse_peek(args()).err(),
                    // HITALL's numkeys comes first; the vocabulary's numbers stand for it.
                    2 => parse_hitall(words.iter().copied()).err(),
                    3 => parse_gcra(args()).err(),
                    4 => parse_cl_throttle(args()).err(),
                    // The prefix is any word.
                    5 => parse_audit(words.iter().copied(), 100).err(),
                    6 => parse_repair(words.iter().copied(), 100).err(),
                    7 => parse_slide(args()).err(),
                    8 => parse_acquire(args()).err(),
                    9 => parse_release(args()).err(),
                    10 => parse_renew(args()).err(),
                    11 => parse_settle(args()).err(),
                    12 => parse_adapt(args()).err(),
                    _ => parse_report(args()).err(),
                }
            });
            lacking.extend(missing(command, page, found));
        }
        let top = errors_over(TOP_WORDS, |words| parse_top(words.iter().copied()).err());
        lacking.extend(missing("ratelimit.top", include_str!("../../../docs/commands/ratelimit.top.md"), top));
        assert!(lacking.is_empty(), "{}", lacking.join("\n"));
    }

    #[test]
    fn the_stored_values_errors_are_in_the_pages() {
        use crate::core::adaptive::State;
        use crate::core::slide::Counts;
        use crate::core::stored::Value;
        for (page, error) in [
            (include_str!("../../../docs/commands/ratelimit.hit.md"), <i64 as Value>::INVALID),
            (include_str!("../../../docs/commands/ratelimit.slide.md"), Counts::INVALID),
            (include_str!("../../../docs/commands/ratelimit.hitall.md"), Counts::INVALID),
            (include_str!("../../../docs/commands/ratelimit.adapt.md"), State::INVALID),
            (include_str!("../../../docs/commands/ratelimit.report.md"), State::INVALID),
        ] {
            assert!(page.contains(error), "{error}");
        }
    }
}
