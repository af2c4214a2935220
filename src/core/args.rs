//! Argument parsing for every command, free of Redis types so that each rule is unit-tested here
//! and the command glue only moves bytes in and errors out.

use crate::core::calendar::{Unit, Window, Zone};
use crate::core::decimal::parse_i64;
use crate::core::gcra::{Overflow, Rate};
use crate::core::top::View;
use crate::core::window::{Limit, MAX_WINDOW_MS};

/// `RATELIMIT.PEEK key limit [COST cost]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeekArgs {
    pub limit: i64,
    pub cost: i64,
}

/// `RATELIMIT.HIT key limit window [COST cost] [MS] [RESERVE] [ALIGN] [TZ zone]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HitArgs {
    pub limit: i64,
    pub cost: i64,
    pub window: Window,
    /// A calendar window's zone (UTC when not given).
    pub zone: Zone,
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

/// `RATELIMIT.SLIDE key limit window [COST cost] [MS] [PEEK | RESERVE]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlideArgs {
    pub limit: Limit,
    /// Answer without writing.
    pub peek: bool,
    pub reserve: bool,
}

/// `RATELIMIT.GCRA key max_burst tokens_per_period period [TOKENS count] [PARTIAL | RESERVE]`,
/// validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcraArgs {
    pub rate: Rate,
    pub reserve: bool,
    /// Grant as many of the tokens as there are, at least one.
    pub partial: bool,
}

/// `RATELIMIT.SETTLE key [key ...] reservation used`, validated but for the reservation, which
/// is read against its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettleArgs<'a> {
    /// How many keys the call names (from the first argument on).
    pub keys: usize,
    pub reservation: &'a [u8],
    pub used: i64,
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

/// `RATELIMIT.AUDIT prefix [LIMIT n]` and `RATELIMIT.REPAIR prefix window [MS] [LIMIT n]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkArgs<'a> {
    pub prefix: &'a [u8],
    /// How many key names the reply lists at most.
    pub names: usize,
    /// The TTL REPAIR gives each leaked counter; `None` for AUDIT.
    pub repair_window_ms: Option<i64>,
}

/// `RATELIMIT.TOP [DENIED | ADMITTED | SHADOWED] [COUNT n] [RESET]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopArgs {
    pub view: View,
    /// How many keys to answer at most.
    pub count: usize,
    /// Start afresh after answering.
    pub reset: bool,
}

/// Keys RATELIMIT.TOP answers when the call gives no COUNT.
pub const TOP_COUNT: usize = 10;

/// Why the arguments were refused; `message()` is the Redis error reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgError {
    /// Too few arguments, or a walk command's positional ones followed by no option name.
    Arity(&'static str),
    /// The named argument is not an integer >= 1.
    NotPositive(&'static str),
    /// The named argument is not an integer >= 0.
    Negative(&'static str),
    /// The named argument is not an integer other than 0.
    Zero(&'static str),
    /// RESERVE with the named amount below 1 (a give-back reserves nothing), or without it.
    ReserveNeeds(&'static str),
    /// GCRA's PARTIAL with a give-back.
    PartialNeedsTokens,
    /// HITALL's TOKENS names more keys than the call has, or fewer than one.
    TokenKeys,
    /// The named length of time exceeds 2^62 ms.
    TooLarge(&'static str),
    /// A lease id that is empty or longer than `MAX_ID_LEN`.
    IdLength,
    MissingValue(&'static str),
    Repeated(&'static str),
    /// An extra argument that is no option of the command; holds the ones it has.
    UnknownOption(&'static str),
    /// HITALL named one key twice.
    DuplicateKey,
    /// Two options that exclude each other.
    Exclusive(&'static str, &'static str),
    // GCRA's errors, worded as Redis's GCRA command words them.
    /// Not a decimal integer in the `i64` range.
    NotAnInteger(&'static str),
    /// An integer below its minimum.
    OutOfRange(&'static str, i64),
    PeriodNotPositive,
    PeriodNotFloat,
    Missing(&'static str),
    /// The product named would not fit in 64 bits of nanoseconds (with room for the clock).
    Overflow(&'static str),
    /// TZ with no calendar window.
    ZoneNeedsCalendar,
    /// TZ names no zone.
    UnknownZone,
}

impl ArgError {
    pub fn message(self) -> String {
        match self {
            ArgError::Arity(command) => format!("ERR wrong number of arguments for '{command}' command"),
            ArgError::NotPositive(name) => format!("ERR {name} must be an integer >= 1"),
            ArgError::Negative(name) => format!("ERR {name} must be an integer >= 0"),
            ArgError::Zero(name) => format!("ERR {name} must be a nonzero integer"),
            ArgError::ReserveNeeds(name) => format!("ERR RESERVE needs {name} >= 1"),
            ArgError::PartialNeedsTokens => "ERR PARTIAL needs TOKENS >= 1".to_string(),
            ArgError::TokenKeys => "ERR TOKENS' key count must be between 1 and numkeys".into(),
            ArgError::TooLarge(name) => format!("ERR {name} is too large"),
            ArgError::IdLength => format!("ERR ID must be 1 to {MAX_ID_LEN} bytes"),
            ArgError::MissingValue(name) => format!("ERR syntax error: {name} needs a value"),
            ArgError::Repeated(name) => format!("ERR syntax error: {name} given more than once"),
            ArgError::UnknownOption(known) => format!("ERR syntax error: unknown option (expected {known})"),
            ArgError::DuplicateKey => "ERR each key may be given only once".to_string(),
            ArgError::Exclusive(a, b) => format!("ERR syntax error: {a} and {b} cannot be given together"),
            ArgError::NotAnInteger(name) => format!("ERR {name} is not an integer or out of range"),
            ArgError::OutOfRange(name, min) => format!("ERR {name} is out of range, must be >= {min}"),
            ArgError::PeriodNotPositive => "ERR period must be > 0".to_string(),
            ArgError::PeriodNotFloat => "ERR period is not a valid float".to_string(),
            ArgError::Missing(name) => format!("ERR Missing {name} value"),
            ArgError::Overflow(what) => format!("ERR {what} would cause an overflow"),
            ArgError::ZoneNeedsCalendar => "ERR TZ needs a calendar window (day, week, month or year)".to_string(),
            ArgError::UnknownZone => {
                "ERR TZ must be UTC, an offset such as +05:30, or a time zone name such as Europe/Paris".to_string()
            }
        }
    }
}

/// An option word: `valued` ones take the next argument.
struct Opt {
    name: &'static str,
    /// Words after the name: 0 (a flag), 1, or 2 (the entry after it, `SECOND`, gets the second).
    values: usize,
}

/// The spec entry after a two-valued option: its second value, never matched by name.
const SECOND: usize = usize::MAX;

/// Reads the options that follow the positional arguments: names case-insensitive, in any
/// order, each at most once. Returns, per spec entry, the option's value (a flag's is its name).
fn options<'a, const N: usize>(
    args: impl Iterator<Item = &'a [u8]>,
    spec: [Opt; N],
    known: &'static str,
) -> Result<[Option<&'a [u8]>; N], ArgError> {
    let mut found = [None; N];
    let mut args = args;
    while let Some(word) = args.next() {
        let i = spec
            .iter()
            .position(|opt| opt.values != SECOND && word.eq_ignore_ascii_case(opt.name.as_bytes()))
            .ok_or(ArgError::UnknownOption(known))?;
        if found[i].is_some() {
            return Err(ArgError::Repeated(spec[i].name));
        }
        let mut value = || args.next().ok_or(ArgError::MissingValue(spec[i].name));
        found[i] = Some(match spec[i].values {
            0 => word,
            _ => value()?,
        });
        if spec[i].values == 2 {
            found[i + 1] = Some(value()?);
        }
    }
    Ok(found)
}

fn positive(bytes: &[u8], name: &'static str) -> Result<i64, ArgError> {
    parse_i64(bytes).filter(|&v| v >= 1).ok_or(ArgError::NotPositive(name))
}

fn window_ms(window: &[u8], in_ms: bool) -> Result<i64, ArgError> {
    duration_ms(window, in_ms, "window")
}

/// A length of time `name` in seconds (ms with `in_ms`): an integer >= 1, at most 2^62 ms.
fn duration_ms(bytes: &[u8], in_ms: bool, name: &'static str) -> Result<i64, ArgError> {
    let value = positive(bytes, name)?;
    let ms = if in_ms { Some(value) } else { value.checked_mul(1000) };
    ms.filter(|&ms| ms <= MAX_WINDOW_MS).ok_or(ArgError::TooLarge(name))
}

/// The longest lease id accepted.
pub const MAX_ID_LEN: usize = 256;

fn lease_id(bytes: &[u8]) -> Result<&[u8], ArgError> {
    (1..=MAX_ID_LEN).contains(&bytes.len()).then_some(bytes).ok_or(ArgError::IdLength)
}

/// `RATELIMIT.ACQUIRE key limit lease [MS] [ID id]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireArgs<'a> {
    pub limit: i64,
    pub lease_ms: i64,
    /// The caller's id; `None`: the module makes one.
    pub id: Option<&'a [u8]>,
}

/// `key limit lease [MS] [ID id]`, after the command name.
pub fn parse_acquire<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<AcquireArgs<'a>, ArgError> {
    let mut args = args.into_iter();
    let (Some(_key), Some(limit), Some(lease)) = (args.next(), args.next(), args.next()) else {
        return Err(ArgError::Arity("ratelimit.acquire"));
    };
    let limit = positive(limit, "limit")?;
    let spec = [Opt { name: "MS", values: 0 }, Opt { name: "ID", values: 1 }];
    let [ms, id] = options(args, spec, "MS or ID")?;
    let lease_ms = duration_ms(lease, ms.is_some(), "lease")?;
    Ok(AcquireArgs { limit, lease_ms, id: id.map(lease_id).transpose()? })
}

/// `key id`, after `RATELIMIT.RELEASE`: the id.
pub fn parse_release<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<&'a [u8], ArgError> {
    let mut args = args.into_iter();
    let (Some(_key), Some(id), None) = (args.next(), args.next(), args.next()) else {
        return Err(ArgError::Arity("ratelimit.release"));
    };
    lease_id(id)
}

/// `key id lease [MS]`, after `RATELIMIT.RENEW`: the id and the lease in ms.
pub fn parse_renew<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<(&'a [u8], i64), ArgError> {
    let mut args = args.into_iter();
    let (Some(_key), Some(id), Some(lease)) = (args.next(), args.next(), args.next()) else {
        return Err(ArgError::Arity("ratelimit.renew"));
    };
    let id = lease_id(id)?;
    let [ms] = options(args, [Opt { name: "MS", values: 0 }], "MS")?;
    Ok((id, duration_ms(lease, ms.is_some(), "lease")?))
}

/// Parses the arguments after the command name: `key limit window [COST cost] [MS] [RESERVE]
/// [ALIGN] [TZ zone]`. The key itself is not inspected here; it is only counted.
pub fn parse_hit<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<HitArgs, ArgError> {
    let spec = [
        Opt { name: "COST", values: 1 },
        Opt { name: "MS", values: 0 },
        Opt { name: "RESERVE", values: 0 },
        Opt { name: "ALIGN", values: 0 },
        Opt { name: "TZ", values: 1 },
    ];
    let (limit, window, cost, [ms, reserve, align, tz]) =
        limit_and(args, "ratelimit.hit", spec, "COST, MS, RESERVE, ALIGN or TZ")?;
    let window = fixed_window(window, ms.is_some(), align.is_some())?;
    let zone = zone(tz, &[window])?;
    let cost = signed_cost(cost)?;
    let reserve = reserved(reserve, cost, "COST")?;
    Ok(HitArgs { limit, cost, window, zone, reserve })
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

/// `key limit window [COST cost] [MS] [PEEK | RESERVE]`, after the command name: HIT's rules,
/// and PEEK.
pub fn parse_slide<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<SlideArgs, ArgError> {
    let spec = [
        Opt { name: "COST", values: 1 },
        Opt { name: "MS", values: 0 },
        Opt { name: "PEEK", values: 0 },
        Opt { name: "RESERVE", values: 0 },
    ];
    let (limit, window, cost, [ms, peek, reserve]) =
        limit_and(args, "ratelimit.slide", spec, "COST, MS, PEEK or RESERVE")?;
    let window_ms = window_ms(window, ms.is_some())?;
    let limit = Limit { limit, window_ms, cost: signed_cost(cost)? };
    if peek.is_some() && reserve.is_some() {
        return Err(ArgError::Exclusive("PEEK", "RESERVE"));
    }
    let reserve = reserved(reserve, limit.cost, "COST")?;
    Ok(SlideArgs { limit, peek: peek.is_some(), reserve })
}

/// Whether RESERVE was given, for an `amount` that must then be >= 1.
fn reserved(flag: Option<&[u8]>, amount: i64, name: &'static str) -> Result<bool, ArgError> {
    match flag {
        Some(_) if amount < 1 => Err(ArgError::ReserveNeeds(name)),
        flag => Ok(flag.is_some()),
    }
}

/// `key reservation used`, after the command name.
pub fn parse_settle<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<SettleArgs<'a>, ArgError> {
    let args: Vec<&[u8]> = args.into_iter().collect();
    let [.., reservation, used] = args[..] else { return Err(ArgError::Arity("ratelimit.settle")) };
    if args.len() < 3 {
        return Err(ArgError::Arity("ratelimit.settle"));
    }
    let used = parse_i64(used).filter(|&u| u >= 0).ok_or(ArgError::Negative("used"))?;
    Ok(SettleArgs { keys: args.len() - 2, reservation, used })
}

/// The values of options after COST (a flag's is its name).
type Options<'a, const M: usize> = [Option<&'a [u8]>; M];

/// The limit, the window's and COST's texts, and the values of the options after COST.
type LimitArgs<'a, const M: usize> = (i64, &'a [u8], Option<&'a [u8]>, Options<'a, M>);

/// `key limit window [COST cost]` and the options of `spec` after COST (which comes first in it):
/// the limit, the window's and COST's texts and the other options' values. The key itself is not
/// inspected, only counted.
fn limit_and<'a, const N: usize, const M: usize>(
    args: impl IntoIterator<Item = &'a [u8]>,
    command: &'static str,
    spec: [Opt; N],
    known: &'static str,
) -> Result<LimitArgs<'a, M>, ArgError> {
    let mut args = args.into_iter();
    let (Some(_key), Some(limit), Some(window)) = (args.next(), args.next(), args.next()) else {
        return Err(ArgError::Arity(command));
    };
    let limit = positive(limit, "limit")?;
    let found = options(args, spec, known)?;
    Ok((limit, window, found[0], std::array::from_fn(|i| found[1 + i])))
}

/// COST's value, read after the window: nonzero, and a negative one gives back.
fn signed_cost(cost: Option<&[u8]>) -> Result<i64, ArgError> {
    cost.map_or(Ok(1), |c| parse_i64(c).filter(|&c| c != 0).ok_or(ArgError::Zero("COST")))
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

/// `numkeys key [key ...] limit window [limit window ...] [COST cost] [MS] [SLIDE | ALIGN] [TZ
/// zone]`, after the command name.
pub fn parse_hitall<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<HitAllArgs<'a>, ArgError> {
    const ARITY: ArgError = ArgError::Arity("ratelimit.hitall");
    let mut args = args.into_iter();
    let numkeys = args.next().ok_or(ARITY)?;
    let numkeys = positive(numkeys, "numkeys")?;
    // Taken one by one, so that a huge numkeys with few arguments allocates nothing.
    let mut keys: Vec<&[u8]> = Vec::new();
    for _ in 0..numkeys {
        let key = args.next().ok_or(ARITY)?;
        if keys.contains(&key) {
            return Err(ArgError::DuplicateKey);
        }
        keys.push(key);
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

fn at_least(bytes: &[u8], name: &'static str, min: i64) -> Result<i64, ArgError> {
    let value = parse_i64(bytes).ok_or(ArgError::NotAnInteger(name))?;
    (value >= min).then_some(value).ok_or(ArgError::OutOfRange(name, min))
}

/// A period in seconds as a decimal number (`60`, `0.5`, `1e-3`), to the nearest nanosecond.
fn period_ns(bytes: &[u8]) -> Result<i64, ArgError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ArgError::PeriodNotFloat)?;
    // Rust's parser also takes "NaN" and a leading '+', as strtod does; NaN is no number here.
    let seconds: f64 = text.parse().ok().filter(|s: &f64| !s.is_nan()).ok_or(ArgError::PeriodNotFloat)?;
    if seconds <= 0.0 {
        return Err(ArgError::PeriodNotPositive);
    }
    let ns = (seconds * 1e9).round();
    // i64::MAX as f64 rounds up to 2^63, which is already out of range.
    (ns < i64::MAX as f64).then_some(ns as i64).ok_or(ArgError::Overflow("period"))
}

/// `key max_burst tokens_per_period period [TOKENS count] [RESERVE]`, after the command name: the
/// shape of Redis's `GCRA` command. The emission interval is `period / tokens_per_period`, to the
/// nanosecond below (at least 1 ns), as redis-cell computes it. Negative TOKENS give back.
pub fn parse_gcra<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<GcraArgs, ArgError> {
    let mut args = args.into_iter();
    let (Some(_key), Some(max_burst), Some(per_period), Some(period)) =
        (args.next(), args.next(), args.next(), args.next())
    else {
        return Err(ArgError::Arity("ratelimit.gcra"));
    };
    // Redis's GCRA says "out of range" for any bad max_burst, an integer or not.
    let max_burst = parse_i64(max_burst).filter(|&b| b >= 0).ok_or(ArgError::OutOfRange("max_burst", 0))?;
    let per_period = at_least(per_period, "tokens_per_period", 1)?;
    let period_ns = period_ns(period)?;
    let spec =
        [Opt { name: "TOKENS", values: 1 }, Opt { name: "RESERVE", values: 0 }, Opt { name: "PARTIAL", values: 0 }];
    let [tokens, reserve, partial] = options(args, spec, "TOKENS, PARTIAL or RESERVE").map_err(|e| match e {
        ArgError::MissingValue(name) => ArgError::Missing(name),
        e => e,
    })?;
    let tokens = match tokens {
        None => 1,
        Some(t) => parse_i64(t).ok_or(ArgError::NotAnInteger("TOKENS")).and_then(|t| match t {
            0 => Err(ArgError::Zero("TOKENS")),
            t => Ok(t),
        })?,
    };
    let reserve = reserved(reserve, tokens, "TOKENS")?;
    if partial.is_some() && reserve {
        return Err(ArgError::Exclusive("PARTIAL", "RESERVE"));
    }
    if partial.is_some() && tokens < 1 {
        return Err(ArgError::PartialNeedsTokens);
    }
    let emission_ns = (period_ns / per_period).max(1);
    let rate = Rate::new(max_burst, emission_ns, tokens).map_err(|o| match o {
        Overflow::Burst => ArgError::Overflow("(max_burst + 1) * period / tokens_per_period"),
        Overflow::Tokens => ArgError::Overflow("TOKENS * period / tokens_per_period"),
    })?;
    Ok(GcraArgs { rate, reserve, partial: partial.is_some() })
}

/// `key max_burst count_per_period period [quantity]` after `CL.THROTTLE`, as redis-cell reads it:
/// integers as Rust's `i64` parser takes them (`+5` and `007` too), `period` in whole seconds, the
/// emission interval computed in floating point as redis-cell computes it, `quantity` 0 a look, a
/// negative one a give-back. Where redis-cell takes any integer and computes nonsense (a count of
/// 0, a negative period), these are refused.
pub fn parse_cl_throttle<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<Rate, ArgError> {
    let args: Vec<&[u8]> = args.into_iter().take(6).collect();
    let [_key, max_burst, per_period, period, ref rest @ ..] = args[..] else {
        return Err(ArgError::Arity("cl.throttle"));
    };
    if rest.len() > 1 {
        return Err(ArgError::Arity("cl.throttle"));
    }
    let integer = |bytes: &[u8], name: &'static str, min: i64| -> Result<i64, ArgError> {
        let value: i64 =
            std::str::from_utf8(bytes).ok().and_then(|t| t.parse().ok()).ok_or(ArgError::NotAnInteger(name))?;
        (value >= min).then_some(value).ok_or(ArgError::OutOfRange(name, min))
    };
    let max_burst = integer(max_burst, "max_burst", 0)?;
    let per_period = integer(per_period, "count per period", 1)?;
    let period = integer(period, "period", 1)?;
    let quantity = rest.first().map_or(Ok(1), |q| integer(q, "quantity", i64::MIN))?;
    let period_ns = period.checked_mul(1_000_000_000).ok_or(ArgError::Overflow("period"))?;
    let emission_ns = ((period_ns as f64 / per_period as f64) as i64).max(1);
    Rate::new(max_burst, emission_ns, quantity).map_err(|o| match o {
        Overflow::Burst => ArgError::Overflow("(max_burst + 1) * period / count per period"),
        Overflow::Tokens => ArgError::Overflow("quantity * period / count per period"),
    })
}

fn names_limit(value: Option<&[u8]>, default: usize) -> Result<usize, ArgError> {
    let Some(value) = value else { return Ok(default) };
    let n = parse_i64(value).filter(|&n| n >= 0).ok_or(ArgError::Negative("LIMIT"))?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// `prefix [LIMIT n]`, after the command name; `default_names` stands for a missing LIMIT.
pub fn parse_audit<'a>(
    args: impl IntoIterator<Item = &'a [u8]>,
    default_names: usize,
) -> Result<WalkArgs<'a>, ArgError> {
    let mut args = args.into_iter();
    let Some(prefix) = args.next() else {
        return Err(ArgError::Arity("ratelimit.audit"));
    };
    let [limit] = options(args, [Opt { name: "LIMIT", values: 1 }], "LIMIT")?;
    Ok(WalkArgs { prefix, names: names_limit(limit, default_names)?, repair_window_ms: None })
}

/// `prefix window [MS] [LIMIT n]`, after the command name; `default_names` stands for a missing LIMIT.
pub fn parse_repair<'a>(
    args: impl IntoIterator<Item = &'a [u8]>,
    default_names: usize,
) -> Result<WalkArgs<'a>, ArgError> {
    let mut args = args.into_iter();
    let (Some(prefix), Some(window)) = (args.next(), args.next()) else {
        return Err(ArgError::Arity("ratelimit.repair"));
    };
    let spec = [Opt { name: "MS", values: 0 }, Opt { name: "LIMIT", values: 1 }];
    let [ms, limit] = options(args, spec, "MS or LIMIT")?;
    let window_ms = window_ms(window, ms.is_some())?;
    Ok(WalkArgs { prefix, names: names_limit(limit, default_names)?, repair_window_ms: Some(window_ms) })
}

/// `[DENIED | ADMITTED | SHADOWED] [COUNT n] [RESET]`, after the command name.
pub fn parse_top<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<TopArgs, ArgError> {
    let spec = [
        Opt { name: "DENIED", values: 0 },
        Opt { name: "ADMITTED", values: 0 },
        Opt { name: "SHADOWED", values: 0 },
        Opt { name: "COUNT", values: 1 },
        Opt { name: "RESET", values: 0 },
    ];
    let [denied, admitted, shadowed, count, reset] =
        options(args.into_iter(), spec, "DENIED, ADMITTED, SHADOWED, COUNT or RESET")?;
    let views = [
        ("DENIED", denied, View::Denied),
        ("ADMITTED", admitted, View::Admitted),
        ("SHADOWED", shadowed, View::Shadowed),
    ];
    let mut given = views.iter().filter(|(_, flag, _)| flag.is_some());
    let view = match (given.next(), given.next()) {
        (Some((a, ..)), Some((b, ..))) => return Err(ArgError::Exclusive(a, b)),
        (Some(&(_, _, view)), None) => view,
        _ => View::Denied,
    };
    let count = match count {
        Some(n) => usize::try_from(positive(n, "COUNT")?).unwrap_or(usize::MAX),
        None => TOP_COUNT,
    };
    Ok(TopArgs { view, count, reset: reset.is_some() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> impl Iterator<Item = &[u8]> {
        line.split(' ').map(str::as_bytes)
    }

    /// HIT's limit at the Unix epoch (a rolling window's is its whole length at any time).
    fn hit(line: &str) -> Result<Limit, ArgError> {
        parse_hit(words(line)).and_then(|a| a.at(0))
    }

    fn ok(limit: i64, window_ms: i64, cost: i64) -> Result<Limit, ArgError> {
        Ok(Limit { limit, window_ms, cost })
    }

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
        assert_eq!(hit("k 10 60 SECONDS"), Err(ArgError::UnknownOption("COST, MS, RESERVE, ALIGN or TZ")));
        assert_eq!(hit("k 10 60 MS extra"), Err(ArgError::UnknownOption("COST, MS, RESERVE, ALIGN or TZ")));
        assert_eq!(hit("k 10 60 "), Err(ArgError::UnknownOption("COST, MS, RESERVE, ALIGN or TZ")));
        assert_eq!(hit("k 10 60 RESERVE RESERVE"), Err(ArgError::Repeated("RESERVE")));
    }

    #[test]
    fn a_negative_cost_gives_back_and_reserve_needs_a_positive_one() {
        assert_eq!(hit("k 10 60 COST -2"), ok(10, 60_000, -2));
        assert_eq!(hit("k 10 60 COST -9223372036854775808"), ok(10, 60_000, i64::MIN));
        assert_eq!(
            parse_hit(words("k 10 60 reserve COST 3")),
            Ok(HitArgs { limit: 10, cost: 3, window: Window::Rolling(60_000), zone: Zone::Offset(0), reserve: true })
        );
        assert!(!parse_hit(words("k 10 60")).unwrap().reserve);
        assert_eq!(parse_settle(words("k h:x 5")), Ok(SettleArgs { keys: 1, reservation: b"h:x", used: 5 }));
        assert_eq!(
            parse_settle(words("a b c h:x,h:y 5")),
            Ok(SettleArgs { keys: 3, reservation: b"h:x,h:y", used: 5 })
        );
        assert_eq!(parse_settle(words("k r 0")).map(|a| a.used), Ok(0));
        for line in ["k r -1", "k r x", "k r 1.5", "k r +1", "k r 1 -2"] {
            assert_eq!(parse_settle(words(line)), Err(ArgError::Negative("used")), "{line}");
        }
        for line in ["k r", "k", ""] {
            assert_eq!(parse_settle(words(line)), Err(ArgError::Arity("ratelimit.settle")), "{line}");
        }
        let gcra = |line| parse_gcra(words(line));
        assert_eq!(gcra("k 4 1 1 TOKENS -2").map(|a| (a.rate.tokens, a.rate.increment_ns)), Ok((-2, -2 * SECOND)));
        assert_eq!(gcra("k 4 1 1 TOKENS 0"), Err(ArgError::Zero("TOKENS")));
        assert_eq!(gcra("k 4 1 1 TOKENS -2 RESERVE"), Err(ArgError::ReserveNeeds("TOKENS")));
        assert!(gcra("k 4 1 1 RESERVE").unwrap().reserve);
        assert!(gcra("k 4 1 1 partial TOKENS 3").unwrap().partial);
        assert_eq!(
            gcra("k 4 1 1 TOKENS -9223372036854775808"),
            Err(ArgError::Overflow("TOKENS * period / tokens_per_period"))
        );
    }

    #[test]
    fn slide_reads_hits_arguments_and_peek() {
        let slide = |line| parse_slide(words(line));
        let at = |limit, window_ms, cost, peek| {
            Ok(SlideArgs { limit: Limit { limit, window_ms, cost }, peek, reserve: false })
        };
        assert_eq!(slide("k 10 60"), at(10, 60_000, 1, false));
        assert_eq!(slide("k 10 250 peek cost 2 MS"), at(10, 250, 2, true));
        assert_eq!(slide("k 10"), Err(ArgError::Arity("ratelimit.slide")));
        assert_eq!(slide("k 0 60"), Err(ArgError::NotPositive("limit")));
        assert_eq!(slide("k 10 60 PEEK PEEK"), Err(ArgError::Repeated("PEEK")));
        assert_eq!(slide("k 10 60 SLIDE"), Err(ArgError::UnknownOption("COST, MS, PEEK or RESERVE")));
        assert_eq!(slide("k 10 60 PEEK RESERVE"), Err(ArgError::Exclusive("PEEK", "RESERVE")));
        assert_eq!(slide("k 10 60 COST -1 RESERVE"), Err(ArgError::ReserveNeeds("COST")));
        assert!(slide("k 10 60 RESERVE").unwrap().reserve);
        assert_eq!(slide("k 10 60 COST"), Err(ArgError::MissingValue("COST")));
        assert_eq!(slide("k 10 9223372036854775"), Err(ArgError::TooLarge("window")));
    }

    #[test]
    fn leases() {
        let acquire = |line| parse_acquire(words(line));
        let ok = |limit, lease_ms, id: Option<&'static [u8]>| Ok(AcquireArgs { limit, lease_ms, id });
        assert_eq!(acquire("k 3 30"), ok(3, 30_000, None));
        assert_eq!(acquire("k 3 30 id job-7 ms"), ok(3, 30, Some(b"job-7")));
        assert_eq!(acquire("k 3"), Err(ArgError::Arity("ratelimit.acquire")));
        assert_eq!(acquire("k 0 30"), Err(ArgError::NotPositive("limit")));
        assert_eq!(acquire("k 3 0"), Err(ArgError::NotPositive("lease")));
        assert_eq!(acquire("k 3 9223372036854775"), Err(ArgError::TooLarge("lease")));
        assert_eq!(acquire("k 3 30 ID"), Err(ArgError::MissingValue("ID")));
        assert_eq!(acquire("k 3 30 ID "), Err(ArgError::IdLength));
        assert_eq!(acquire("k 3 30 COST 1"), Err(ArgError::UnknownOption("MS or ID")));
        let long = format!("k 3 30 ID {}", "x".repeat(MAX_ID_LEN + 1));
        assert_eq!(parse_acquire(words(&long)), Err(ArgError::IdLength));
        let longest = format!("k 3 30 ID {}", "x".repeat(MAX_ID_LEN));
        assert!(parse_acquire(words(&longest)).is_ok());
        assert_eq!(parse_release(words("k a")), Ok(&b"a"[..]));
        assert_eq!(parse_release(words("k")), Err(ArgError::Arity("ratelimit.release")));
        assert_eq!(parse_release(words("k a b")), Err(ArgError::Arity("ratelimit.release")));
        assert_eq!(parse_renew(words("k a 5 MS")), Ok((&b"a"[..], 5)));
        assert_eq!(parse_renew(words("k a 5")), Ok((&b"a"[..], 5_000)));
        assert_eq!(parse_renew(words("k a")), Err(ArgError::Arity("ratelimit.renew")));
        assert_eq!(parse_renew(words("k a 5 ID b")), Err(ArgError::UnknownOption("MS")));
    }

    const DEFAULT: usize = 100;

    fn parse_audit_<'a>(words: impl IntoIterator<Item = &'a [u8]>) -> Result<WalkArgs<'a>, ArgError> {
        parse_audit(words, DEFAULT)
    }

    fn parse_repair_<'a>(words: impl IntoIterator<Item = &'a [u8]>) -> Result<WalkArgs<'a>, ArgError> {
        parse_repair(words, DEFAULT)
    }

    fn walk(prefix: &[u8], names: usize, repair_window_ms: Option<i64>) -> Result<WalkArgs<'_>, ArgError> {
        Ok(WalkArgs { prefix, names, repair_window_ms })
    }

    #[test]
    fn audit() {
        assert_eq!(parse_audit_(words("rl:")), walk(b"rl:", DEFAULT, None));
        assert_eq!(parse_audit_([&b""[..]]), walk(b"", DEFAULT, None));
        assert_eq!(parse_audit_(words("rl:* limit 0")), walk(b"rl:*", 0, None));
        assert_eq!(parse_audit_(words("rl: LIMIT 7")), walk(b"rl:", 7, None));
        assert_eq!(parse_audit_(std::iter::empty()), Err(ArgError::Arity("ratelimit.audit")));
        assert_eq!(parse_audit_(words("rl: LIMIT")), Err(ArgError::MissingValue("LIMIT")));
        assert_eq!(parse_audit_(words("rl: LIMIT -1")), Err(ArgError::Negative("LIMIT")));
        assert_eq!(parse_audit_(words("rl: LIMIT x")), Err(ArgError::Negative("LIMIT")));
        assert_eq!(parse_audit_(words("rl: LIMIT 1 LIMIT 2")), Err(ArgError::Repeated("LIMIT")));
        assert_eq!(parse_audit_(words("rl: 60")), Err(ArgError::UnknownOption("LIMIT")));
        assert_eq!(parse_audit_(words("rl: MS")), Err(ArgError::UnknownOption("LIMIT")));
    }

    #[test]
    fn repair() {
        assert_eq!(parse_repair_(words("rl: 60")), walk(b"rl:", DEFAULT, Some(60_000)));
        assert_eq!(parse_repair_(words("rl: 60 ms")), walk(b"rl:", DEFAULT, Some(60)));
        assert_eq!(parse_repair_(words("rl: 60 LIMIT 3 MS")), walk(b"rl:", 3, Some(60)));
        assert_eq!(parse_repair_(words("rl:")), Err(ArgError::Arity("ratelimit.repair")));
        assert_eq!(parse_repair_(words("rl: 0")), Err(ArgError::NotPositive("window")));
        assert_eq!(parse_repair_(words("rl: -5")), Err(ArgError::NotPositive("window")));
        assert_eq!(parse_repair_(words("rl: LIMIT")), Err(ArgError::NotPositive("window")));
        assert_eq!(parse_repair_(words("rl: 60 LIMIT -2")), Err(ArgError::Negative("LIMIT")));
        assert_eq!(parse_repair_(words("rl: 60 MS MS")), Err(ArgError::Repeated("MS")));
        assert_eq!(parse_repair_(words("rl: 60 COST 1")), Err(ArgError::UnknownOption("MS or LIMIT")));
        assert_eq!(parse_repair_(words("rl: 9223372036854775")), Err(ArgError::TooLarge("window")));
    }

    #[test]
    fn top() {
        let top = |line: &str| parse_top(words(line).filter(|w| !w.is_empty()));
        let args = |view, count, reset| Ok(TopArgs { view, count, reset });
        assert_eq!(top(""), args(View::Denied, TOP_COUNT, false));
        assert_eq!(top("admitted count 3"), args(View::Admitted, 3, false));
        assert_eq!(top("RESET Denied COUNT 1"), args(View::Denied, 1, true));
        assert_eq!(top("DENIED ADMITTED"), Err(ArgError::Exclusive("DENIED", "ADMITTED")));
        assert_eq!(top("shadowed"), args(View::Shadowed, TOP_COUNT, false));
        assert_eq!(top("SHADOWED DENIED"), Err(ArgError::Exclusive("DENIED", "SHADOWED")));
        assert_eq!(top("ADMITTED SHADOWED"), Err(ArgError::Exclusive("ADMITTED", "SHADOWED")));
        assert_eq!(top("COUNT 0"), Err(ArgError::NotPositive("COUNT")));
        assert_eq!(top("COUNT x"), Err(ArgError::NotPositive("COUNT")));
        assert_eq!(top("COUNT"), Err(ArgError::MissingValue("COUNT")));
        assert_eq!(top("RESET RESET"), Err(ArgError::Repeated("RESET")));
        assert_eq!(top("LIMIT 3"), Err(ArgError::UnknownOption("DENIED, ADMITTED, SHADOWED, COUNT or RESET")));
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

    fn gcra(line: &str) -> Result<Rate, ArgError> {
        parse_gcra(words(line)).map(|a| a.rate)
    }

    const SECOND: i64 = 1_000_000_000;

    #[test]
    fn gcra_arguments() {
        assert_eq!(gcra("k 4 1 1"), Ok(Rate::new(4, SECOND, 1).unwrap()));
        let r = gcra("k 0 10 60 TOKENS 3").unwrap();
        assert_eq!((r.capacity, r.emission_ns, r.tokens, r.increment_ns), (1, 6 * SECOND, 3, 18 * SECOND));
        assert_eq!(gcra("k 9 2 0.5").unwrap().emission_ns, SECOND / 4);
        assert_eq!(gcra("k 9 3 1").unwrap().emission_ns, 333_333_333, "the nanosecond below");
        assert_eq!(gcra("k 9 1 0.3").unwrap().emission_ns, 300_000_000, "the nearest nanosecond");
        assert_eq!(gcra("k 9 1 1e-3").unwrap().emission_ns, 1_000_000);
        assert_eq!(gcra("k 9 1000 0.000000001").unwrap().emission_ns, 1, "at least 1 ns");
        assert_eq!(gcra("k 1 1 1 tokens 2").unwrap().tokens, 2);
    }

    #[test]
    fn gcra_errors() {
        for (line, err) in [
            ("k 1 1", ArgError::Arity("ratelimit.gcra")),
            ("k -1 1 1", ArgError::OutOfRange("max_burst", 0)),
            ("k x 1 1", ArgError::OutOfRange("max_burst", 0)),
            ("k 1 0 1", ArgError::OutOfRange("tokens_per_period", 1)),
            ("k 1 x 1", ArgError::NotAnInteger("tokens_per_period")),
            ("k 1 1 0", ArgError::PeriodNotPositive),
            ("k 1 1 -2.5", ArgError::PeriodNotPositive),
            ("k 1 1 x", ArgError::PeriodNotFloat),
            ("k 1 1 NaN", ArgError::PeriodNotFloat),
            ("k 1 1 1s", ArgError::PeriodNotFloat),
            ("k 1 1 1 TOKENS", ArgError::Missing("TOKENS")),
            ("k 1 1 1 TOKENS 0", ArgError::Zero("TOKENS")),
            ("k 1 1 1 TOKENS 1.5", ArgError::NotAnInteger("TOKENS")),
            ("k 1 1 1 TOKENS 1 TOKENS 1", ArgError::Repeated("TOKENS")),
            ("k 1 1 1 COST 1", ArgError::UnknownOption("TOKENS, PARTIAL or RESERVE")),
            ("k 1 1 1 TOKENS 2 PARTIAL RESERVE", ArgError::Exclusive("PARTIAL", "RESERVE")),
            ("k 1 1 1 TOKENS -2 PARTIAL", ArgError::PartialNeedsTokens),
            ("k 1 1 1 PARTIAL partial", ArgError::Repeated("PARTIAL")),
            ("k 1 1 86400 TOKENS 200000000", ArgError::Overflow("TOKENS * period / tokens_per_period")),
            ("k 200000000 1 86400", ArgError::Overflow("(max_burst + 1) * period / tokens_per_period")),
            ("k 1 1 1e300", ArgError::Overflow("period")),
            ("k 1 1 inf", ArgError::Overflow("period")),
        ] {
            assert_eq!(gcra(line), Err(err), "{line}");
        }
        assert_eq!(ArgError::Missing("TOKENS").message(), "ERR Missing TOKENS value");
        assert_eq!(ArgError::PeriodNotPositive.message(), "ERR period must be > 0");
        assert_eq!(ArgError::PeriodNotFloat.message(), "ERR period is not a valid float");
        assert!(ArgError::OutOfRange("max_burst", 0).message().contains("out of range"));
        assert!(ArgError::NotAnInteger("TOKENS").message().contains("not an integer"));
        assert!(ArgError::Overflow("period").message().ends_with("would cause an overflow"));
    }

    #[test]
    fn cl_throttle_arguments() {
        let cl = |line| parse_cl_throttle(words(line));
        let r = cl("k 15 30 60").unwrap();
        assert_eq!((r.capacity, r.emission_ns, r.tokens), (16, 2 * SECOND, 1));
        assert_eq!(cl("k 15 30 60 0").unwrap().increment_ns, 0, "quantity 0 looks");
        assert_eq!(cl("k +1 007 60 3").unwrap().tokens, 3, "as Rust's i64 parser reads them");
        assert_eq!(cl("k 1 3 1").unwrap().emission_ns, 333_333_333);
        for (line, err) in [
            ("k 1 1", ArgError::Arity("cl.throttle")),
            ("k 1 1 1 1 1", ArgError::Arity("cl.throttle")),
            ("k -1 1 1", ArgError::OutOfRange("max_burst", 0)),
            ("k 1 0 1", ArgError::OutOfRange("count per period", 1)),
            ("k 1 1 0", ArgError::OutOfRange("period", 1)),
            ("k 1 1 1.5", ArgError::NotAnInteger("period")),
            ("k 1 1 1 x", ArgError::NotAnInteger("quantity")),
            ("k 1 1 9223372036854775807", ArgError::Overflow("period")),
            ("k 200000000 1 86400", ArgError::Overflow("(max_burst + 1) * period / count per period")),
        ] {
            assert_eq!(cl(line), Err(err), "{line}");
        }
    }

    #[test]
    fn messages() {
        assert_eq!(
            ArgError::Arity("ratelimit.hit").message(),
            "ERR wrong number of arguments for 'ratelimit.hit' command"
        );
        assert_eq!(ArgError::NotPositive("COST").message(), "ERR COST must be an integer >= 1");
        assert_eq!(ArgError::Negative("LIMIT").message(), "ERR LIMIT must be an integer >= 0");
        assert_eq!(ArgError::TooLarge("window").message(), "ERR window is too large");
        assert_eq!(ArgError::MissingValue("COST").message(), "ERR syntax error: COST needs a value");
        assert_eq!(ArgError::Repeated("MS").message(), "ERR syntax error: MS given more than once");
        assert_eq!(
            ArgError::UnknownOption("COST or MS").message(),
            "ERR syntax error: unknown option (expected COST or MS)"
        );
        assert_eq!(ArgError::DuplicateKey.message(), "ERR each key may be given only once");
    }
}

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
                prop_assert_eq!(parse_hit(without_peek).map(|h| (h.at(0), h.reserve)), Ok((Ok(a.limit), a.reserve)));
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
            ("ratelimit.hit", include_str!("../../docs/commands/ratelimit.hit.md"), 0),
            ("ratelimit.peek", include_str!("../../docs/commands/ratelimit.peek.md"), 1),
            ("ratelimit.hitall", include_str!("../../docs/commands/ratelimit.hitall.md"), 2),
            ("ratelimit.gcra", include_str!("../../docs/commands/ratelimit.gcra.md"), 3),
            ("cl.throttle", include_str!("../../docs/commands/cl.throttle.md"), 4),
            ("ratelimit.audit", include_str!("../../docs/commands/ratelimit.audit.md"), 5),
            ("ratelimit.repair", include_str!("../../docs/commands/ratelimit.repair.md"), 6),
            ("ratelimit.slide", include_str!("../../docs/commands/ratelimit.slide.md"), 7),
            ("ratelimit.acquire", include_str!("../../docs/commands/ratelimit.acquire.md"), 8),
            ("ratelimit.release", include_str!("../../docs/commands/ratelimit.release.md"), 9),
            ("ratelimit.renew", include_str!("../../docs/commands/ratelimit.renew.md"), 10),
            ("ratelimit.settle", include_str!("../../docs/commands/ratelimit.settle.md"), 11),
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
                    _ => parse_settle(args()).err(),
                }
            });
            lacking.extend(missing(command, page, found));
        }
        let top = errors_over(TOP_WORDS, |words| parse_top(words.iter().copied()).err());
        lacking.extend(missing("ratelimit.top", include_str!("../../docs/commands/ratelimit.top.md"), top));
        assert!(lacking.is_empty(), "{}", lacking.join("\n"));
    }

    #[test]
    fn the_stored_values_errors_are_in_the_pages() {
        use crate::core::slide::Counts;
        use crate::core::stored::Value;
        for (page, error) in [
            (include_str!("../../docs/commands/ratelimit.hit.md"), <i64 as Value>::INVALID),
            (include_str!("../../docs/commands/ratelimit.slide.md"), Counts::INVALID),
            (include_str!("../../docs/commands/ratelimit.hitall.md"), Counts::INVALID),
        ] {
            assert!(page.contains(error), "{error}");
        }
    }
}
