//! Decimal integers exactly as Redis reads and writes them, so that a counter written by
//! `RATELIMIT.HIT` is one that `INCR` accepts, and the other way round.

/// The longest decimal `i64`: `-9223372036854775808`.
pub const MAX_LEN: usize = 20;

/// Parses like Redis's `string2ll`: an optional `-`, then digits with no leading zero (except a
/// lone `0`), fitting in an `i64`. No `+`, no spaces, no `-0`.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes {
        [b'0'] => return Some(0),
        [b'-', rest @ ..] => (true, rest),
        _ => (false, bytes),
    };
    match digits.first() {
        Some(b'1'..=b'9') if digits.len() < MAX_LEN => {}
        _ => return None,
    }
    // Accumulate as a negative number: its range reaches i64::MIN, which the positive one doesn't.
    let mut value: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(b - b'0'))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

/// `parse_i64` for what may not be negative, in a cheaper pass: a lone `0`, or digits with no
/// leading zero, fitting in an `i64`. The sliding window reads four of these on every call.
pub fn parse_natural(digits: &[u8]) -> Option<i64> {
    match digits {
        [b'0'] => return Some(0),
        [b'1'..=b'9', ..] if digits.len() < MAX_LEN => {}
        _ => return None,
    }
    // At most 19 digits: no u64 overflows.
    let mut value = 0u64;
    for &b in digits {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value * 10 + u64::from(digit);
    }
    i64::try_from(value).ok()
}

/// Writes `value` in decimal into `buf` and returns the digits (at the end of `buf`).
pub fn format_i64(value: i64, buf: &mut [u8; MAX_LEN]) -> &[u8] {
    let mut start = MAX_LEN;
    let mut rest = value.unsigned_abs();
    loop {
        start -= 1;
        buf[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if value < 0 {
        start -= 1;
        buf[start] = b'-';
    }
    &buf[start..]
}

/// "00" to "99", for writing two digits at a time.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Writes `value` in decimal at `buf[at..]` and returns where it ends: the hot path's writer,
/// straight into the value being built. `buf` must have room (20 bytes at most).
pub fn put_u64(buf: &mut [u8], at: usize, value: u64) -> usize {
    let end = at + value.checked_ilog10().map_or(1, |d| d as usize + 1);
    let (mut rest, mut i) = (value, end);
    while rest >= 10 {
        let pair = (rest % 100) as usize * 2;
        rest /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if i > at {
        buf[at] = b'0' + rest as u8;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_u64_writes_what_format_writes() {
        for v in [0u64, 1, 9, 10, 99, 100, 101, 999, 1000, 1_700_000_040_000, i64::MAX as u64, u64::MAX]
            .into_iter()
            .chain((0..2_000).map(|i| i * 7919))
        {
            let mut buf = [b'#'; 24];
            let end = put_u64(&mut buf, 2, v);
            assert_eq!(&buf[2..end], v.to_string().as_bytes());
            assert_eq!((buf[..2].to_vec(), buf[end..].iter().all(|&b| b == b'#')), (b"##".to_vec(), true));
        }
    }

    #[test]
    fn parses_what_redis_accepts() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"7"), Some(7));
        assert_eq!(parse_i64(b"-7"), Some(-7));
        assert_eq!(parse_i64(b"1234567890"), Some(1_234_567_890));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn rejects_what_redis_rejects() {
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"00",
            b"1.5",
            b"1e3",
            b"abc",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999",
            b"123456789012345678901",
            b"\xff",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn formats_and_round_trips() {
        let mut buf = [0; MAX_LEN];
        for v in [0, 1, 9, 10, -1, -10, 12345, i64::MAX, i64::MIN, i64::MIN + 1] {
            let text = format_i64(v, &mut buf);
            assert_eq!(text, v.to_string().as_bytes());
            assert_eq!(parse_i64(text), Some(v));
        }
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Redis's rules stated differently: what Rust parses, minus `+`, leading zeros and `-0`.
    fn reference(bytes: &[u8]) -> Option<i64> {
        let text = std::str::from_utf8(bytes).ok()?;
        let digits = text.strip_prefix('-').unwrap_or(text);
        let leading_zero = digits.len() > 1 && digits.starts_with('0');
        let canonical = !(text.starts_with('+') || leading_zero || text == "-0");
        text.parse().ok().filter(|_| canonical)
    }

    proptest! {
        #[test]
        fn format_then_parse_is_identity(v: i64) {
            let mut buf = [0; MAX_LEN];
            prop_assert_eq!(parse_i64(format_i64(v, &mut buf)), Some(v));
        }

        #[test]
        fn parse_agrees_with_the_reference(bytes in prop::collection::vec(prop::sample::select(b"-+0123456789 x".to_vec()), 0..22)) {
            prop_assert_eq!(parse_i64(&bytes), reference(&bytes));
        }

        #[test]
        fn parse_natural_is_parse_i64_without_negatives(
            bytes in prop::collection::vec(prop::sample::select(b"-+0123456789 x".to_vec()), 0..22),
            v in 0..=i64::MAX,
        ) {
            prop_assert_eq!(parse_natural(&bytes), parse_i64(&bytes).filter(|&n| n >= 0));
            prop_assert_eq!(parse_natural(v.to_string().as_bytes()), Some(v));
        }
    }
}
