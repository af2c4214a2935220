//! The fixed and sliding windows' arguments: `RATELIMIT.HIT`, `PEEK`, `SLIDE` and `HITALL`.

use crate::core::calendar::{Unit, Window, Zone};
use crate::core::decimal::parse_i64;
use crate::core::window::Limit;

use super::error::ArgError;
use super::read::*;

/// `RATELIMIT.PEEK key limit [COST cost]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeekArgs {
    pub limit: i64,
    pub cost: i64,
}

/// `RATELIMIT.HIT key limit window [COST cost] [MS] [PARTIAL] [RESERVE] [ALIGN] [TZ zone]`,
/// validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HitArgs {
    pub limit: i64,
    pub cost: i64,
    pub window: Window,
    /// A calendar window's zone (UTC when not given).
    pub zone: Zone,
    /// Grant as many of `cost` as the window has left, at least one.
    pub partial: bool,
    /// Reply with a reservation for SETTLE.
    pub reserve: bool,
}

impl HitArgs {
    /// The limit at `now_ms`: its window is what is left of the one running then.
    pub fn at(&self, now_ms: i64) -> Result<Limit, ArgError> {
        Ok(Limit { limit: self.limit, window_ms: window_left(self.window, now_ms, &self.zone)?, cost: self.cost })
    }
}

/// What is left at `now_ms` of `window`; a calendar window past the year 9999 is too large.
fn window_left(window: Window, now_ms: i64, zone: &Zone) -> Result<i64, ArgError> {
    match window {
        // The usual window, without a call.
        Window::Rolling(ms) => Ok(ms),
        laid => laid.left(now_ms, zone).ok_or(ArgError::TooLarge("window")),
    }
}

/// `RATELIMIT.SLIDE key limit window [COST cost] [MS] [PARTIAL] [PEEK | RESERVE]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlideArgs {
    pub limit: Limit,
    /// Grant as many of the cost as the estimate has room for, at least one.
    pub partial: bool,
    /// Answer without writing.
    pub peek: bool,
    pub reserve: bool,
}

/// `RATELIMIT.HITALL numkeys key [key ...] limit window [limit window ...] [COST cost] [MS]
/// [SLIDE | ALIGN] [TZ zone] [TOKENS tokens numtokenkeys [RESERVE]]`: a limit and its window per
/// key, in order (the options apply to all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HitAllArgs<'a> {
    pub keys: Vec<&'a [u8]>,
    pub limits: Vec<(i64, Window)>,
    /// What each key counts, but the token keys.
    pub cost: i64,
    pub zone: Zone,
    /// Sliding windows rather than fixed ones (every window is then rolling, in ms).
    pub slide: bool,
    /// What the last keys count instead (a request's tokens), and how many they are.
    pub tokens: Option<Tokens>,
    /// Reply with a reservation of the token keys' count, for SETTLE.
    pub reserve: bool,
}

/// TOKENS: `amount` counted on the last `keys` keys of a HITALL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tokens {
    pub amount: i64,
    pub keys: usize,
}

impl HitAllArgs<'_> {
    /// Every key's limit at `now_ms`, as `HitArgs::at`, each with what it counts.
    pub fn at(&self, now_ms: i64) -> Result<Vec<Limit>, ArgError> {
        let first_token_key = self.first_token_key();
        let limit = |(i, &(limit, window)): (usize, &(i64, Window))| {
            let cost = match self.tokens {
                Some(t) if i >= first_token_key => t.amount,
                _ => self.cost,
            };
            Ok(Limit { limit, window_ms: window_left(window, now_ms, &self.zone)?, cost })
        };
        self.limits.iter().enumerate().map(limit).collect()
    }

    /// The index of the first key TOKENS counts on (the number of keys when none).
    pub fn first_token_key(&self) -> usize {
        self.keys.len() - self.tokens.map_or(0, |t| t.keys)
    }
}

/// Parses the arguments after the command name: `key limit window [COST cost] [MS] [PARTIAL]
/// [RESERVE] [ALIGN] [TZ zone]`. The key itself is not inspected here; it is only counted.
pub fn parse_hit<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<HitArgs, ArgError> {
    let spec = [
        Opt { name: "COST", values: 1 },
        Opt { name: "MS", values: 0 },
        Opt { name: "PARTIAL", values: 0 },
        Opt { name: "RESERVE", values: 0 },
        Opt { name: "ALIGN", values: 0 },
        Opt { name: "TZ", values: 1 },
    ];
    let (limit, window, cost, [ms, partial, reserve, align, tz]) =
        limit_and(args, "ratelimit.hit", spec, "COST, MS, PARTIAL, RESERVE, ALIGN or TZ")?;
    let window = fixed_window(window, ms.is_some(), align.is_some())?;
    let zone = zone(tz, &[window])?;
    let cost = signed_cost(cost)?;
    let partial = partial_of(partial, cost, "COST")?;
    let reserve = reserved(reserve, cost, "COST")?;
    Ok(HitArgs { limit, cost, window, zone, partial, reserve })
}

/// A fixed window from its `window` argument: a calendar unit (not in ms), else a length,
/// ALIGNed or not.
fn fixed_window(text: &[u8], ms: bool, align: bool) -> Result<Window, ArgError> {
    match Unit::named(text) {
        Some(_) if ms => Err(ArgError::Exclusive("MS", "a calendar window")),
        Some(unit) => Ok(Window::Calendar(unit)),
        None if align => Ok(Window::Aligned(window_ms(text, ms)?)),
        None => Ok(Window::Rolling(window_ms(text, ms)?)),
    }
}

/// The zone TZ names (UTC when not given), for calendar windows: TZ needs one among `windows`.
fn zone(tz: Option<&[u8]>, windows: &[Window]) -> Result<Zone, ArgError> {
    let Some(text) = tz else { return Ok(Zone::Offset(0)) };
    if !windows.iter().any(|w| matches!(w, Window::Calendar(_))) {
        return Err(ArgError::ZoneNeedsCalendar);
    }
    Zone::parse(text).map_err(|_| ArgError::UnknownZone)
}

/// `key limit window [COST cost] [MS] [PARTIAL] [PEEK | RESERVE]`, after the command name:
/// HIT's rules, and PEEK.
pub fn parse_slide<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<SlideArgs, ArgError> {
    let spec = [
        Opt { name: "COST", values: 1 },
        Opt { name: "MS", values: 0 },
        Opt { name: "PARTIAL", values: 0 },
        Opt { name: "PEEK", values: 0 },
        Opt { name: "RESERVE", values: 0 },
    ];
    let (limit, window, cost, [ms, partial, peek, reserve]) =
        limit_and(args, "ratelimit.slide", spec, "COST, MS, PARTIAL, PEEK or RESERVE")?;
    let window_ms = window_ms(window, ms.is_some())?;
    let limit = Limit { limit, window_ms, cost: signed_cost(cost)? };
    if peek.is_some() && reserve.is_some() {
        return Err(ArgError::Exclusive("PEEK", "RESERVE"));
    }
    let partial = partial_of(partial, limit.cost, "COST")?;
    let reserve = reserved(reserve, limit.cost, "COST")?;
    Ok(SlideArgs { limit, partial, peek: peek.is_some(), reserve })
}

/// `key limit [COST cost]`, after the command name.
pub fn parse_peek<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<PeekArgs, ArgError> {
    let mut args = args.into_iter();
    let (Some(_key), Some(limit)) = (args.next(), args.next()) else {
        return Err(ArgError::Arity("ratelimit.peek"));
    };
    let limit = positive(limit, "limit")?;
    let [cost] = options(args, [Opt { name: "COST", values: 1 }], "COST")?;
    let cost = cost.map_or(Ok(1), |c| positive(c, "COST"))?;
    Ok(PeekArgs { limit, cost })
}

/// Whether a key is given twice: compared pairwise when few, sorted when many (a batch of a
/// hundred keys would compare each pair).
fn repeats(keys: &[&[u8]]) -> bool {
    if keys.len() <= 8 {
        return keys.iter().enumerate().any(|(i, k)| keys[..i].contains(k));
    }
    let mut sorted = keys.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).any(|w| w[0] == w[1])
}

/// `numkeys key [key ...] limit window [limit window ...] [COST cost] [MS] [SLIDE | ALIGN] [TZ
/// zone] [TOKENS tokens numtokenkeys [RESERVE]]`, after the command name.
pub fn parse_hitall<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<HitAllArgs<'a>, ArgError> {
    const ARITY: ArgError = ArgError::Arity("ratelimit.hitall");
    let mut args = args.into_iter();
    let numkeys = args.next().ok_or(ARITY)?;
    let numkeys = positive(numkeys, "numkeys")?;
    // Taken one by one, so that a huge numkeys with few arguments allocates nothing. A key
    // given twice is refused before a missing one, as when each was checked on arrival.
    let mut keys: Vec<&[u8]> = Vec::new();
    for _ in 0..numkeys {
        match args.next() {
            Some(key) => keys.push(key),
            None if repeats(&keys) => return Err(ArgError::DuplicateKey),
            None => return Err(ARITY),
        }
    }
    if repeats(&keys) {
        return Err(ArgError::DuplicateKey);
    }
    let mut pairs = Vec::with_capacity(keys.len());
    for _ in 0..keys.len() {
        let (Some(limit), Some(window)) = (args.next(), args.next()) else { return Err(ARITY) };
        pairs.push((positive(limit, "limit")?, window));
    }
    let spec = [
        Opt { name: "COST", values: 1 },
        Opt { name: "MS", values: 0 },
        Opt { name: "SLIDE", values: 0 },
        Opt { name: "ALIGN", values: 0 },
        Opt { name: "TZ", values: 1 },
        Opt { name: "TOKENS", values: 2 },
        Opt { name: "TOKENS", values: SECOND },
        Opt { name: "RESERVE", values: 0 },
    ];
    let [cost, ms, slide, align, tz, tokens, token_keys, reserve] =
        options(args, spec, "COST, MS, SLIDE, ALIGN, TZ, TOKENS or RESERVE")?;
    let cost = cost.map_or(Ok(1), |c| positive(c, "COST"))?;
    if slide.is_some() && align.is_some() {
        return Err(ArgError::Exclusive("SLIDE", "ALIGN"));
    }
    let limits = pairs
        .into_iter()
        .map(|(limit, window)| Ok((limit, fixed_window(window, ms.is_some(), align.is_some())?)))
        .collect::<Result<Vec<_>, ArgError>>()?;
    let windows: Vec<Window> = limits.iter().map(|&(_, w)| w).collect();
    if slide.is_some() && windows.iter().any(|w| matches!(w, Window::Calendar(_))) {
        return Err(ArgError::Exclusive("SLIDE", "a calendar window"));
    }
    let zone = zone(tz, &windows)?;
    let tokens = match (tokens, token_keys) {
        (Some(amount), Some(count)) => {
            let amount = positive(amount, "TOKENS")?;
            let count = parse_i64(count).filter(|&n| (1..=keys.len() as i64).contains(&n));
            Some(Tokens { amount, keys: count.ok_or(ArgError::TokenKeys)? as usize })
        }
        _ => None,
    };
    if reserve.is_some() && tokens.is_none() {
        return Err(ArgError::ReserveNeeds("TOKENS"));
    }
    Ok(HitAllArgs { keys, limits, cost, zone, slide: slide.is_some(), tokens, reserve: reserve.is_some() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::args::testing::{hit, ok, words};
    use crate::core::window::MAX_WINDOW_MS;

    #[test]
    fn hit_positional_only() {
        assert_eq!(hit("k 10 60"), ok(10, 60_000, 1));
    }

    #[test]
    fn hit_options_any_order_any_case() {
        assert_eq!(hit("k 10 60 COST 3"), ok(10, 60_000, 3));
        assert_eq!(hit("k 10 250 MS"), ok(10, 250, 1));
        assert_eq!(hit("k 10 250 ms cost 2"), ok(10, 250, 2));
        assert_eq!(hit("k 10 250 CoSt 2 Ms"), ok(10, 250, 2));
    }

    #[test]
    fn hit_cost_above_limit_is_accepted_here() {
        assert_eq!(hit("k 1 1 COST 5"), ok(1, 1000, 5));
    }

    #[test]
    fn hit_arity() {
        let arity = Err(ArgError::Arity("ratelimit.hit"));
        assert_eq!(parse_hit(std::iter::empty()).and_then(|a| a.at(0)), arity);
        assert_eq!(hit("k"), arity);
        assert_eq!(hit("k 10"), arity);
    }

    #[test]
    fn hit_bad_numbers() {
        for (line, err) in [
            ("k 0 60", ArgError::NotPositive("limit")),
            ("k -1 60", ArgError::NotPositive("limit")),
            ("k x 60", ArgError::NotPositive("limit")),
            ("k 1.5 60", ArgError::NotPositive("limit")),
            ("k 99999999999999999999 60", ArgError::NotPositive("limit")),
            ("k 10 0", ArgError::NotPositive("window")),
            ("k 10 -5", ArgError::NotPositive("window")),
            ("k 10 ten", ArgError::NotPositive("window")),
            ("k 10 60 COST 0", ArgError::Zero("COST")),
            ("k 10 60 COST -0", ArgError::Zero("COST")),
            ("k 10 60 COST MS", ArgError::Zero("COST")),
            ("k 10 60 COST -2 RESERVE", ArgError::ReserveNeeds("COST")),
            ("k 10 60 COST", ArgError::MissingValue("COST")),
        ] {
            assert_eq!(hit(line), Err(err), "{line}");
        }
    }

    #[test]
    fn window_overflow() {
        assert_eq!(hit("k 10 9223372036854775807"), Err(ArgError::TooLarge("window")));
        assert_eq!(hit("k 10 9223372036854775"), Err(ArgError::TooLarge("window")));
        assert_eq!(hit("k 10 4611686018427387"), ok(10, 4_611_686_018_427_387_000, 1));
        assert_eq!(hit("k 10 9223372036854775807 MS"), Err(ArgError::TooLarge("window")));
        assert_eq!(hit("k 10 4611686018427387903 MS"), ok(10, MAX_WINDOW_MS, 1));
    }

    #[test]
    fn hit_syntax() {
        assert_eq!(hit("k 10 60 COST 1 COST 2"), Err(ArgError::Repeated("COST")));
        assert_eq!(hit("k 10 60 MS MS"), Err(ArgError::Repeated("MS")));
        assert_eq!(hit("k 10 60 SECONDS"), Err(ArgError::UnknownOption("COST, MS, PARTIAL, RESERVE, ALIGN or TZ")));
        assert_eq!(hit("k 10 60 MS extra"), Err(ArgError::UnknownOption("COST, MS, PARTIAL, RESERVE, ALIGN or TZ")));
        assert_eq!(hit("k 10 60 "), Err(ArgError::UnknownOption("COST, MS, PARTIAL, RESERVE, ALIGN or TZ")));
        assert_eq!(hit("k 10 60 RESERVE RESERVE"), Err(ArgError::Repeated("RESERVE")));
    }

    #[test]
    fn slide_reads_hits_arguments_and_peek() {
        let slide = |line| parse_slide(words(line));
        let at = |limit, window_ms, cost, peek| {
            Ok(SlideArgs { limit: Limit { limit, window_ms, cost }, partial: false, peek, reserve: false })
        };
        assert_eq!(slide("k 10 60"), at(10, 60_000, 1, false));
        assert_eq!(slide("k 10 250 peek cost 2 MS"), at(10, 250, 2, true));
        assert_eq!(slide("k 10"), Err(ArgError::Arity("ratelimit.slide")));
        assert_eq!(slide("k 0 60"), Err(ArgError::NotPositive("limit")));
        assert_eq!(slide("k 10 60 PEEK PEEK"), Err(ArgError::Repeated("PEEK")));
        assert_eq!(slide("k 10 60 SLIDE"), Err(ArgError::UnknownOption("COST, MS, PARTIAL, PEEK or RESERVE")));
        let partial = slide("k 10 60 cost 5 partial reserve").unwrap();
        assert!(partial.partial && partial.reserve && !partial.peek);
        assert!(slide("k 10 60 COST 5 PARTIAL PEEK").unwrap().peek);
        assert_eq!(slide("k 10 60 COST -5 PARTIAL"), Err(ArgError::PartialNeeds("COST")));
        assert_eq!(slide("k 10 60 PARTIAL PARTIAL"), Err(ArgError::Repeated("PARTIAL")));
        assert_eq!(slide("k 10 60 PEEK RESERVE"), Err(ArgError::Exclusive("PEEK", "RESERVE")));
        assert_eq!(slide("k 10 60 COST -1 RESERVE"), Err(ArgError::ReserveNeeds("COST")));
        assert!(slide("k 10 60 RESERVE").unwrap().reserve);
        assert_eq!(slide("k 10 60 COST"), Err(ArgError::MissingValue("COST")));
        assert_eq!(slide("k 10 9223372036854775"), Err(ArgError::TooLarge("window")));
    }

    #[test]
    fn peek() {
        assert_eq!(parse_peek(words("k 10")), Ok(PeekArgs { limit: 10, cost: 1 }));
        assert_eq!(parse_peek(words("k 10 cost 3")), Ok(PeekArgs { limit: 10, cost: 3 }));
        assert_eq!(parse_peek(words("k")), Err(ArgError::Arity("ratelimit.peek")));
        assert_eq!(parse_peek(words("k 0")), Err(ArgError::NotPositive("limit")));
        assert_eq!(parse_peek(words("k 10 60")), Err(ArgError::UnknownOption("COST")));
        assert_eq!(parse_peek(words("k 10 MS")), Err(ArgError::UnknownOption("COST")));
        assert_eq!(parse_peek(words("k 10 COST 0")), Err(ArgError::NotPositive("COST")));
    }

    #[test]
    fn hitall() {
        let parsed = parse_hitall(words("2 a b 10 1 1000 3600 COST 2 MS")).unwrap();
        assert_eq!(parsed.keys, [b"a", b"b"]);
        assert_eq!(parsed.limits, [(10, Window::Rolling(1)), (1000, Window::Rolling(3600))]);
        assert_eq!(parsed.cost, 2);
        let one = parse_hitall(words("1 a 5 60")).unwrap();
        assert_eq!(one.at(0), Ok(vec![Limit { limit: 5, window_ms: 60_000, cost: 1 }]));
        let arity = Err(ArgError::Arity("ratelimit.hitall"));
        assert_eq!(parse_hitall(std::iter::empty()), arity);
        assert_eq!(parse_hitall(words("2 a b 10 1")), arity);
        assert_eq!(parse_hitall(words("2 a")), arity);
        assert_eq!(parse_hitall(words("9223372036854775807 a b c")), arity);
        assert_eq!(parse_hitall(words("0 a 1 1")), Err(ArgError::NotPositive("numkeys")));
        assert_eq!(parse_hitall(words("x a 1 1")), Err(ArgError::NotPositive("numkeys")));
        assert_eq!(parse_hitall(words("2 a a 1 1 1 1")), Err(ArgError::DuplicateKey));
        assert_eq!(parse_hitall(words("3 a a")), Err(ArgError::DuplicateKey));
        assert_eq!(parse_hitall(words("3 a b")), Err(ArgError::Arity("ratelimit.hitall")));
        let many = |last: &str| {
            format!(
                "12 {} {last} {}",
                (0..11).map(|i| format!("k{i}")).collect::<Vec<_>>().join(" "),
                "1 1 ".repeat(12).trim_end()
            )
        };
        assert_eq!(parse_hitall(words(&many("k3"))), Err(ArgError::DuplicateKey));
        assert_eq!(parse_hitall(words(&many("k11"))).err(), None);
        assert_eq!(parse_hitall(words("1 a 0 1")), Err(ArgError::NotPositive("limit")));
        assert_eq!(parse_hitall(words("1 a 1 0")), Err(ArgError::NotPositive("window")));
        assert_eq!(
            parse_hitall(words("1 a 1 1 LIMIT 1")),
            Err(ArgError::UnknownOption("COST, MS, SLIDE, ALIGN, TZ, TOKENS or RESERVE"))
        );
        assert!(!one.slide);
        assert!(parse_hitall(words("1 a 5 60 slide")).unwrap().slide);
        // TOKENS on the last keys, RESERVE with them only.
        let tokens = parse_hitall(words("3 r t d 2 60 100 60 500 day TOKENS 40 2 RESERVE")).unwrap();
        assert_eq!(
            (tokens.tokens, tokens.reserve, tokens.first_token_key()),
            (Some(Tokens { amount: 40, keys: 2 }), true, 1)
        );
        assert_eq!(tokens.at(0).unwrap().iter().map(|l| l.cost).collect::<Vec<_>>(), [1, 40, 40]);
        let costly = parse_hitall(words("2 r t 2 60 100 60 cost 3 tokens 40 1")).unwrap();
        assert_eq!(costly.at(0).unwrap().iter().map(|l| l.cost).collect::<Vec<_>>(), [3, 40]);
        assert!(!costly.reserve);
        for (line, error) in [
            ("1 a 5 60 TOKENS 0 1", ArgError::NotPositive("TOKENS")),
            ("1 a 5 60 TOKENS 5 2", ArgError::TokenKeys),
            ("1 a 5 60 TOKENS 5 0", ArgError::TokenKeys),
            ("1 a 5 60 TOKENS 5 -1", ArgError::TokenKeys),
            ("1 a 5 60 TOKENS 5", ArgError::MissingValue("TOKENS")),
            ("1 a 5 60 RESERVE", ArgError::ReserveNeeds("TOKENS")),
        ] {
            assert_eq!(parse_hitall(words(line)), Err(error), "{line}");
        }
        assert_eq!(parse_hitall(words("1 a 5 60 SLIDE SLIDE")), Err(ArgError::Repeated("SLIDE")));
        assert_eq!(parse_hitall(words("1 a 1 9223372036854775")), Err(ArgError::TooLarge("window")));
    }

    #[test]
    fn windows_laid_on_the_clock() {
        let hit = |line| parse_hit(words(line)).map(|a| (a.window, a.zone));
        assert_eq!(hit("k 10 60 ALIGN"), Ok((Window::Aligned(60_000), Zone::Offset(0))));
        assert_eq!(hit("k 10 250 ms align"), Ok((Window::Aligned(250), Zone::Offset(0))));
        assert_eq!(hit("k 10 MONTH"), Ok((Window::Calendar(Unit::Month), Zone::Offset(0))));
        assert_eq!(hit("k 10 week align tz -03:00"), Ok((Window::Calendar(Unit::Week), Zone::Offset(-10_800_000))));
        assert!(matches!(hit("k 10 day TZ America/New_York"), Ok((Window::Calendar(Unit::Day), Zone::Named(_)))));
        for (line, err) in [
            ("k 10 day MS", ArgError::Exclusive("MS", "a calendar window")),
            ("k 10 60 TZ UTC", ArgError::ZoneNeedsCalendar),
            ("k 10 day TZ Nowhere/City", ArgError::UnknownZone),
            ("k 10 day TZ", ArgError::MissingValue("TZ")),
            ("k 10 days", ArgError::NotPositive("window")),
            ("k 10 60 ALIGN ALIGN", ArgError::Repeated("ALIGN")),
        ] {
            assert_eq!(hit(line), Err(err), "{line}");
        }
        let all = parse_hitall(words("2 a b 10 60 1000 month TZ +01:00")).unwrap();
        assert_eq!(all.limits, [(10, Window::Rolling(60_000)), (1000, Window::Calendar(Unit::Month))]);
        assert_eq!(all.zone, Zone::Offset(3_600_000));
        for (line, err) in [
            ("1 a 10 60 SLIDE ALIGN", ArgError::Exclusive("SLIDE", "ALIGN")),
            ("2 a b 10 60 5 day SLIDE", ArgError::Exclusive("SLIDE", "a calendar window")),
            ("2 a b 10 60 5 60 TZ UTC", ArgError::ZoneNeedsCalendar),
            ("1 a 5 day TZ +99:00", ArgError::UnknownZone),
        ] {
            assert_eq!(parse_hitall(words(line)), Err(err), "{line}");
        }
    }
}
