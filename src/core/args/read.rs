//! What the command families' parsers share: the options after the positional arguments, and
//! the readers of numbers, lengths of time and a limit with its window.

use crate::core::decimal::parse_i64;
use crate::core::window::MAX_WINDOW_MS;

use super::error::ArgError;

/// An option word: `valued` ones take the next argument.
pub(super) struct Opt {
    pub(super) name: &'static str,
    /// Words after the name: 0 (a flag), 1, or 2 (the entry after it, `SECOND`, gets the second).
    pub(super) values: usize,
}

/// The spec entry after a two-valued option: its second value, never matched by name.
pub(super) const SECOND: usize = usize::MAX;

/// Reads the options that follow the positional arguments: names case-insensitive, in any
/// order, each at most once. Returns, per spec entry, the option's value (a flag's is its name).
pub(super) fn options<'a, const N: usize>(
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

pub(super) fn positive(bytes: &[u8], name: &'static str) -> Result<i64, ArgError> {
    parse_i64(bytes).filter(|&v| v >= 1).ok_or(ArgError::NotPositive(name))
}

pub(super) fn window_ms(window: &[u8], in_ms: bool) -> Result<i64, ArgError> {
    duration_ms(window, in_ms, "window")
}

/// A length of time `name` in seconds (ms with `in_ms`): an integer >= 1, at most 2^62 ms.
pub(super) fn duration_ms(bytes: &[u8], in_ms: bool, name: &'static str) -> Result<i64, ArgError> {
    let value = positive(bytes, name)?;
    let ms = if in_ms { Some(value) } else { value.checked_mul(1000) };
    ms.filter(|&ms| ms <= MAX_WINDOW_MS).ok_or(ArgError::TooLarge(name))
}

/// Whether PARTIAL was given, for an `amount` that must then be >= 1.
pub(super) fn partial_of(flag: Option<&[u8]>, amount: i64, name: &'static str) -> Result<bool, ArgError> {
    match flag {
        Some(_) if amount < 1 => Err(ArgError::PartialNeeds(name)),
        flag => Ok(flag.is_some()),
    }
}

/// Whether RESERVE was given, for an `amount` that must then be >= 1.
pub(super) fn reserved(flag: Option<&[u8]>, amount: i64, name: &'static str) -> Result<bool, ArgError> {
    match flag {
        Some(_) if amount < 1 => Err(ArgError::ReserveNeeds(name)),
        flag => Ok(flag.is_some()),
    }
}

/// The values of options after COST (a flag's is its name).
pub(super) type Options<'a, const M: usize> = [Option<&'a [u8]>; M];

/// The limit, the window's and COST's texts, and the values of the options after COST.
pub(super) type LimitArgs<'a, const M: usize> = (i64, &'a [u8], Option<&'a [u8]>, Options<'a, M>);

/// `key limit window [COST cost]` and the options of `spec` after COST (which comes first in it):
/// the limit, the window's and COST's texts and the other options' values. The key itself is not
/// inspected, only counted.
pub(super) fn limit_and<'a, const N: usize, const M: usize>(
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
pub(super) fn signed_cost(cost: Option<&[u8]>) -> Result<i64, ArgError> {
    cost.map_or(Ok(1), |c| parse_i64(c).filter(|&c| c != 0).ok_or(ArgError::Zero("COST")))
}

/// The longest lease id accepted.
pub const MAX_ID_LEN: usize = 256;

/// A lease id: 1 to `MAX_ID_LEN` bytes.
pub(super) fn lease_id(bytes: &[u8]) -> Result<&[u8], ArgError> {
    (1..=MAX_ID_LEN).contains(&bytes.len()).then_some(bytes).ok_or(ArgError::IdLength(MAX_ID_LEN))
}

pub(super) fn at_least(bytes: &[u8], name: &'static str, min: i64) -> Result<i64, ArgError> {
    let value = parse_i64(bytes).ok_or(ArgError::NotAnInteger(name))?;
    (value >= min).then_some(value).ok_or(ArgError::OutOfRange(name, min))
}
