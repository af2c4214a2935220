//! Reservations: what `RESERVE` hands out and `RATELIMIT.SETTLE` takes back, as text. A
//! reservation names the algorithm, the limit it was counted against, the window it was counted
//! in and how that window is laid, the amount reserved, and its key (the name's 32-bit FNV-1a
//! hash in 8 hex digits: a check against a reservation sent with another key, not a signature;
//! cheap on every RESERVE, and exact in the Functions library's doubles):
//!
//! - `h:<limit>:<window_ms>:<window_end_ms>:<amount>:<key>`: HIT's, the window that ends then;
//! - `a:<limit>:<window_ms>:<window_end_ms>:<amount>:<key>`: HIT's with ALIGN;
//! - `c:<limit>:<unit>:<window_end_ms>:<amount>:<key>[:<zone>]`: HIT's in a calendar window (the
//!   unit 0 to 3: day, week, month, year), in the zone as TZ takes it (none for UTC);
//! - `s:<limit>:<window_ms>:<window_start_ms>:<amount>:<key>`: SLIDE's, the aligned window from then;
//! - `g:<capacity>:<emission_ns>:<amount>:<key>`: GCRA's (a bucket has no windows);
//! - `d:<floor>:<start>:<ceiling>:<window_ms>:<epoch_start_ms>:<amount>:<key>`: ADAPT's, the
//!   limit's bounds (a settle that finds the state forgotten starts it again, as ADAPT would) and
//!   the epoch it was counted in.
//!
//! `<key>` is the tag followed by the reservation's id, 16 lowercase hex digits: SETTLE marks the
//! id settled (`core::settle_marks`), so that settling it again changes nothing. A reservation
//! with the tag alone (made by a module before ids) still settles, without that guarantee.
//!
//! Clients treat it as opaque; the module reads it back with the rules below, so that a text it
//! did not make is refused before anything is written.

use crate::core::adaptive::{Bounds, MAX_SCALED, MAX_SPAN_MS};
use crate::core::calendar::{Unit, Window, MAX_NAME_LEN};
use crate::core::decimal::put_u64;
use crate::core::gcra::MAX_SPAN_NS;
use crate::core::window::MAX_WINDOW_MS;

/// The key's part of a reservation: 8 lowercase hex digits.
pub type KeyTag = [u8; TAG_LEN];
const TAG_LEN: usize = 8;

/// A reservation's id: unique among the reservations of one key while they count (`id`).
pub type Id = [u8; ID_LEN];
pub const ID_LEN: usize = 16;

/// The longest reservation text: the kind, six 19-digit numbers and their separators, the tag
/// and the id, and a calendar window's zone.
pub const MAX_LEN: usize = 1 + MAX_NUMBERS * 20 + 1 + TAG_LEN + ID_LEN + 1 + MAX_NAME_LEN;

/// The most numbers a reservation holds (an adaptive limit's).
const MAX_NUMBERS: usize = 6;

/// The `n`th id of a process whose ids start from `seed`: SplitMix64's output for `seed + n·γ`,
/// a bijection, so that one process never hands out the same id twice, and processes with random
/// seeds (restarts, a promoted replica) almost never one another's.
pub fn id(seed: u64, n: u64) -> Id {
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hex(z ^ (z >> 31))
}

/// What was reserved, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserved<'z> {
    /// RATELIMIT.HIT's: the counter's window that ends at `window_end_ms` (its absolute expiry),
    /// laid as `window`; a calendar window's zone as TZ takes it (empty: UTC).
    Hit { limit: i64, window: Window, zone: &'z [u8], window_end_ms: i64, amount: i64 },
    /// RATELIMIT.SLIDE's: the aligned window that starts at `start_ms`.
    Slide { limit: i64, window_ms: i64, start_ms: i64, amount: i64 },
    /// RATELIMIT.GCRA's: tokens of a bucket of `capacity` tokens, one back every `emission_ns`.
    Gcra { capacity: i64, emission_ns: i64, amount: i64 },
    /// RATELIMIT.ADAPT's: tokens of an adaptive limit of `bounds`, counted in the epoch that
    /// started at `epoch_start_ms`.
    Adapt { bounds: Bounds, epoch_start_ms: i64, amount: i64 },
}

/// Why a reservation is refused; `message()` is the error reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not a text RESERVE makes.
    Malformed,
    /// Made for another key.
    OtherKey,
}

impl Refused {
    pub fn message(self) -> &'static str {
        match self {
            Refused::Malformed => "ERR invalid reservation",
            Refused::OtherKey => "ERR the reservation is for another key",
        }
    }
}

/// Exactly `count` (at most `MAX_NUMBERS`) ':'-separated decimal integers >= 0, as Redis reads
/// them (no sign, no leading zero, 64-bit), read in one pass: SETTLE reads one on every call.
fn naturals(text: &[u8], count: usize) -> Option<[i64; MAX_NUMBERS]> {
    let mut numbers = [0i64; MAX_NUMBERS];
    let (mut field, mut value, mut digits) = (0, 0u64, 0);
    for &b in text {
        if b == b':' {
            if digits == 0 || field + 1 >= count {
                return None;
            }
            numbers[field] = i64::try_from(value).ok()?;
            (field, value, digits) = (field + 1, 0, 0);
            continue;
        }
        let digit = b.wrapping_sub(b'0');
        // Not a digit, a digit after a leading 0, or a 20th digit (19 fit in a u64).
        if digit > 9 || (digits == 1 && value == 0) || digits == MAX_DIGITS {
            return None;
        }
        (value, digits) = (value * 10 + u64::from(digit), digits + 1);
    }
    if digits == 0 || field + 1 != count {
        return None;
    }
    numbers[field] = i64::try_from(value).ok()?;
    Some(numbers)
}

/// The most digits of an `i64` >= 0.
const MAX_DIGITS: usize = 19;

fn fnv1a(key: &[u8]) -> u32 {
    key.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// A tag's value (8 lowercase hex digits), or an id's (16).
fn hex_value(tag: &[u8]) -> Option<u64> {
    tag.iter().try_fold(0u64, |v, &b| {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None,
        };
        Some(v << 4 | u64::from(digit))
    })
}

/// `value`'s last `N` hex digits, lowercase.
fn hex<const N: usize>(value: u64) -> [u8; N] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0; N];
    for (i, digit) in digits.iter_mut().enumerate() {
        *digit = HEX[((value >> (4 * (N - 1 - i))) & 15) as usize];
    }
    digits
}

/// The tag of `key` in a reservation: FNV-1a, 32 bits, in hex.
pub fn key_tag(key: &[u8]) -> KeyTag {
    hex(u64::from(fnv1a(key)))
}

impl<'z> Reserved<'z> {
    /// The reservation's text for `key`, with its id, written into `buf`.
    pub fn write<'b>(&self, key: &[u8], id: &Id, buf: &'b mut [u8; MAX_LEN]) -> &'b [u8] {
        let (name, fields, zone): (&[u8], &[i64], &[u8]) = match self {
            Reserved::Hit { limit, window, zone, window_end_ms, amount } => match *window {
                Window::Rolling(ms) => (b"h", &[*limit, ms, *window_end_ms, *amount], &[]),
                Window::Aligned(ms) => (b"a", &[*limit, ms, *window_end_ms, *amount], &[]),
                Window::Calendar(unit) => (b"c", &[*limit, unit as i64, *window_end_ms, *amount], zone),
            },
            Reserved::Slide { limit, window_ms, start_ms, amount } => {
                (b"s", &[*limit, *window_ms, *start_ms, *amount], &[])
            }
            Reserved::Gcra { capacity, emission_ns, amount } => (b"g", &[*capacity, *emission_ns, *amount], &[]),
            Reserved::Adapt { bounds: b, epoch_start_ms, amount } => {
                (b"d", &[b.floor, b.start, b.ceiling, b.window_ms, *epoch_start_ms, *amount], &[])
            }
        };
        buf[..name.len()].copy_from_slice(name);
        let mut len = name.len();
        for &field in fields {
            buf[len] = b':';
            // Never negative: the commands reserve only what they counted.
            len = put_u64(buf, len + 1, field.unsigned_abs());
        }
        buf[len] = b':';
        buf[len + 1..len + 1 + TAG_LEN].copy_from_slice(&key_tag(key));
        buf[len + 1 + TAG_LEN..len + 1 + TAG_LEN + ID_LEN].copy_from_slice(id);
        len += 1 + TAG_LEN + ID_LEN;
        if !zone.is_empty() {
            buf[len] = b':';
            buf[len + 1..len + 1 + zone.len()].copy_from_slice(zone);
            len += 1 + zone.len();
        }
        &buf[..len]
    }

    /// Reads a reservation for `key`, and its id if it has one: every field as RESERVE writes it
    /// (decimal integers as Redis reads them, within the commands' bounds), then the key, then a
    /// calendar window's zone (read as TZ when settling).
    pub fn parse(text: &'z [u8], key: &[u8]) -> Result<(Reserved<'z>, Option<&'z Id>), Refused> {
        let (name, rest, count) = match text {
            [name @ (b'h' | b'a' | b'c' | b's'), b':', rest @ ..] => (*name, rest, 4),
            [name @ b'g', b':', rest @ ..] => (*name, rest, 3),
            [name @ b'd', b':', rest @ ..] => (*name, rest, 6),
            _ => return Err(Refused::Malformed),
        };
        // The numbers, then ':', the tag and the id, then for a calendar window ':' and its zone.
        let split = rest.iter().enumerate().filter(|(_, &b)| b == b':').nth(count - 1).map(|(i, _)| i);
        let split = split.ok_or(Refused::Malformed)?;
        let (digits, after) = (&rest[..split], &rest[split + 1..]);
        if after.len() < TAG_LEN {
            return Err(Refused::Malformed);
        }
        let (tag, after) = after.split_at(TAG_LEN);
        let (id, after) = match after {
            [b':', ..] | [] => (None, after),
            _ => match after.split_first_chunk::<ID_LEN>() {
                Some((id, after)) => (Some(id), after),
                None => return Err(Refused::Malformed),
            },
        };
        let zone = match after {
            [] => &[][..],
            [b':', zone @ ..] if name == b'c' && (1..=MAX_NAME_LEN).contains(&zone.len()) => zone,
            _ => return Err(Refused::Malformed),
        };
        if id.is_some_and(|id| hex_value(id).is_none()) {
            return Err(Refused::Malformed);
        }
        let [a, b, c, d, e, f] = naturals(digits, count).ok_or(Refused::Malformed)?;
        let window = |limit: i64, window_ms: i64| limit >= 1 && (1..=MAX_WINDOW_MS).contains(&window_ms);
        let hit = |window, zone| Reserved::Hit { limit: a, window, zone, window_end_ms: c, amount: d };
        let reserved = match name {
            b'h' if window(a, b) && d >= 1 => hit(Window::Rolling(b), &[]),
            b'a' if window(a, b) && c % b == 0 && d >= 1 => hit(Window::Aligned(b), &[]),
            b'c' if a >= 1 && d >= 1 => hit(Window::Calendar(Unit::from_code(b).ok_or(Refused::Malformed)?), zone),
            b's' if window(a, b) && c % b == 0 && d >= 1 => {
                Reserved::Slide { limit: a, window_ms: b, start_ms: c, amount: d }
            }
            b'g' if a >= 1 && b >= 1 && c >= 1 && within_span(b, a) && within_span(b, c) => {
                Reserved::Gcra { capacity: a, emission_ns: b, amount: c }
            }
            // As ADAPT takes them: floor <= start <= ceiling, ceiling and amount times the
            // window within the state's bound, as every time.
            b'd' if 1 <= a
                && a <= b
                && b <= c
                && (1..=MAX_SPAN_MS).contains(&d)
                && c <= MAX_SCALED / d
                && e <= MAX_SCALED
                && (1..=MAX_SCALED / d).contains(&f) =>
            {
                let bounds = Bounds { floor: a, start: b, ceiling: c, window_ms: d };
                Reserved::Adapt { bounds, epoch_start_ms: e, amount: f }
            }
            _ => return Err(Refused::Malformed),
        };
        match hex_value(tag) {
            None => Err(Refused::Malformed),
            Some(t) if t != u64::from(fnv1a(key)) => Err(Refused::OtherKey),
            Some(_) => Ok((reserved, id)),
        }
    }

    /// Until when (Unix ms) what was reserved counts: the end of a fixed window, of the sliding
    /// window's count after the reserved one, for a bucket (which has no windows) the time it
    /// takes from empty to full, from `now_ms`, and for an adaptive limit a window from `now_ms`
    /// (its bucket fills in a sixth of one, its epoch ends within one).
    pub fn counts_until(&self, now_ms: i64) -> i64 {
        match *self {
            Reserved::Hit { window_end_ms, .. } => window_end_ms,
            Reserved::Slide { window_ms, start_ms, .. } => start_ms.saturating_add(window_ms.saturating_mul(2)),
            Reserved::Gcra { capacity, emission_ns, .. } => {
                // Within MAX_SPAN_NS: `parse` checks it.
                now_ms.saturating_add((capacity.saturating_mul(emission_ns) as u64).div_ceil(1_000_000) as i64)
            }
            Reserved::Adapt { bounds, .. } => now_ms.saturating_add(bounds.window_ms),
        }
    }

    /// The amount reserved.
    pub fn amount(&self) -> i64 {
        match *self {
            Reserved::Hit { amount, .. }
            | Reserved::Slide { amount, .. }
            | Reserved::Gcra { amount, .. }
            | Reserved::Adapt { amount, .. } => amount,
        }
    }
}

/// `emission_ns * n` within GCRA's bound on spans.
fn within_span(emission_ns: i64, n: i64) -> bool {
    emission_ns.checked_mul(n).is_some_and(|span| span <= MAX_SPAN_NS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"user:1";
    const ID: &Id = b"0123456789abcdef";

    fn text(r: Reserved) -> String {
        let mut buf = [0; MAX_LEN];
        String::from_utf8(r.write(KEY, ID, &mut buf).to_vec()).unwrap()
    }

    /// A reservation's text without its id, as a module before ids wrote it.
    fn without_id(text: &str) -> String {
        text.replacen(std::str::from_utf8(ID).unwrap(), "", 1)
    }

    #[test]
    fn ids_are_distinct_hex() {
        let ids: std::collections::HashSet<Id> = (0..10_000).map(|n| id(0x5eed, n)).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids.iter().all(|id| hex_value(id).is_some()));
        // Another seed, other ids.
        assert!((0..10_000).all(|n| !ids.contains(&id(0x5eee, n))));
    }

    #[test]
    fn the_key_tag_is_its_fnv1a() {
        // FNV-1a 32 of "", "a" and "abc", as published with the algorithm.
        assert_eq!(&key_tag(b""), b"811c9dc5");
        assert_eq!(&key_tag(b"a"), b"e40c292c");
        assert_eq!(&key_tag(b"abc"), b"1a47e90b");
    }

    #[test]
    fn reservations_round_trip() {
        let tag = String::from_utf8(key_tag(KEY).to_vec()).unwrap();
        let all = [
            (
                Reserved::Hit {
                    limit: 50_000,
                    window: Window::Rolling(60_000),
                    zone: &[],
                    window_end_ms: 1_700_000_060_000,
                    amount: 4_000,
                },
                "h:50000:60000:1700000060000:4000",
            ),
            (
                Reserved::Hit {
                    limit: 50_000,
                    window: Window::Aligned(60_000),
                    zone: &[],
                    window_end_ms: 1_700_000_040_000,
                    amount: 4_000,
                },
                "a:50000:60000:1700000040000:4000",
            ),
            (
                Reserved::Slide { limit: 10, window_ms: 1_000, start_ms: 1_700_000_000_000, amount: 1 },
                "s:10:1000:1700000000000:1",
            ),
            (Reserved::Gcra { capacity: 5, emission_ns: 1_000_000_000, amount: 2 }, "g:5:1000000000:2"),
            (
                Reserved::Adapt {
                    bounds: Bounds { floor: 10, start: 600, ceiling: 2_000, window_ms: 60_000 },
                    epoch_start_ms: 1_700_000_000_000,
                    amount: 4_000,
                },
                "d:10:600:2000:60000:1700000000000:4000",
            ),
        ];
        let id = Some(ID);
        for (r, prefix) in all {
            let t = text(r);
            assert_eq!(t, format!("{prefix}:{tag}0123456789abcdef"));
            assert_eq!(Reserved::parse(t.as_bytes(), KEY), Ok((r, id)));
            assert_eq!(Reserved::parse(without_id(&t).as_bytes(), KEY), Ok((r, None)));
            assert_eq!(Reserved::parse(t.as_bytes(), b"user:2"), Err(Refused::OtherKey));
            assert!([4_000, 1, 2].contains(&r.amount()));
        }
        // A calendar window's unit by its number, and its zone after the tag.
        for (unit, code) in [(Unit::Day, 0), (Unit::Week, 1), (Unit::Month, 2), (Unit::Year, 3)] {
            for zone in [&b""[..], b"+05:30", b"-00:45", b"America/Argentina/ComodRivadavia"] {
                let r = Reserved::Hit {
                    limit: 2_000_000,
                    window: Window::Calendar(unit),
                    zone,
                    window_end_ms: 1_767_225_600_000,
                    amount: 4_000,
                };
                let t = text(r);
                let zone_part =
                    if zone.is_empty() { String::new() } else { format!(":{}", std::str::from_utf8(zone).unwrap()) };
                assert_eq!(t, format!("c:2000000:{code}:1767225600000:4000:{tag}0123456789abcdef{zone_part}"));
                assert_eq!(Reserved::parse(t.as_bytes(), KEY), Ok((r, id)));
                assert_eq!(Reserved::parse(without_id(&t).as_bytes(), KEY), Ok((r, None)));
                assert_eq!(Reserved::parse(t.as_bytes(), b"user:2"), Err(Refused::OtherKey));
            }
        }
        let widest = Reserved::Hit {
            limit: i64::MAX,
            window: Window::Rolling(MAX_WINDOW_MS),
            zone: &[],
            window_end_ms: i64::MAX,
            amount: i64::MAX,
        };
        assert!(text(widest).len() <= MAX_LEN);
        assert_eq!(Reserved::parse(text(widest).as_bytes(), KEY), Ok((widest, id)));
        let zone = [b'z'; MAX_NAME_LEN];
        let widest = Reserved::Hit {
            limit: i64::MAX,
            window: Window::Calendar(Unit::Year),
            zone: &zone,
            window_end_ms: i64::MAX,
            amount: i64::MAX,
        };
        assert!(text(widest).len() <= MAX_LEN);
        assert_eq!(Reserved::parse(text(widest).as_bytes(), KEY), Ok((widest, id)));
        let zero = Reserved::Hit { limit: 1, window: Window::Rolling(1), zone: &[], window_end_ms: 0, amount: 1 };
        assert_eq!(Reserved::parse(format!("h:1:1:0:1:{tag}").as_bytes(), KEY), Ok((zero, None)));
    }

    #[test]
    fn what_was_reserved_counts_until_its_window_ends() {
        let hit =
            Reserved::Hit { limit: 1, window: Window::Rolling(1_000), zone: &[], window_end_ms: 7_000, amount: 1 };
        assert_eq!(hit.counts_until(5_000), 7_000);
        // A sliding window's count weighs on the window after it.
        let slide = Reserved::Slide { limit: 1, window_ms: 1_000, start_ms: 4_000, amount: 1 };
        assert_eq!(slide.counts_until(5_000), 6_000);
        // A bucket of 5 tokens, one back every 1.5 ms: full 7.5 ms after empty, rounded up.
        let gcra = Reserved::Gcra { capacity: 5, emission_ns: 1_500_000, amount: 1 };
        assert_eq!(gcra.counts_until(5_000), 5_008);
        let bounds = Bounds { floor: 1, start: 1, ceiling: 1, window_ms: 60_000 };
        let adapt = Reserved::Adapt { bounds, epoch_start_ms: 0, amount: 1 };
        assert_eq!(adapt.counts_until(5_000), 65_000);
    }

    #[test]
    fn anything_else_is_malformed() {
        let tag = String::from_utf8(key_tag(KEY).to_vec()).unwrap();
        for bad in [
            String::new(),
            "hit".into(),
            format!("h:10:1000:5000:1:{}", &tag[..7]),
            format!("h:10:1000:5000:1:{tag}0"),
            format!("h:10:1000:5000:1:{}", tag.to_uppercase()),
            format!("h:10:1000:5000:{tag}"),
            format!("h:10:1000:5000:1:1:{tag}"),
            format!("h:0:1000:5000:1:{tag}"),
            format!("h:10:0:5000:1:{tag}"),
            format!("h:10:1000:5000:0:{tag}"),
            format!("h:10:4611686018427387904:5000:1:{tag}"),
            format!("h:10:1000:-5000:1:{tag}"),
            format!("h:+10:1000:5000:1:{tag}"),
            format!("h:010:1000:5000:1:{tag}"),
            format!("h:10:1000:00:1:{tag}"),
            format!("h:10::5000:1:{tag}"),
            format!("h:10:1000:5000:1::{tag}"),
            format!(":10:1000:5000:1:{tag}"),
            format!("h:10:1000:9223372036854775808:1:{tag}"),
            format!("h:10:1000:10000000000000000000:1:{tag}"),
            format!("h:10:1000:5 00:1:{tag}"),
            format!("H:10:1000:5000:1:{tag}"),
            format!("s:10:1000:1500:1:{tag}"),
            format!("g:5:1000:{tag}"),
            format!("g:0:1000:1:{tag}"),
            format!("g:5:0:1:{tag}"),
            format!("g:5:1000:0:{tag}"),
            format!("g:5:4611686018427387903:1:{tag}"),
            format!("g:5:1000:1:1:{tag}"),
            format!("leak:5:1000:1:1:{tag}"),
            format!("a:10:1000:1500:1:{tag}"),
            format!("a:10:0:0:1:{tag}"),
            format!("h:10:1000:5000:1:{tag}:UTC"),
            format!("a:10:1000:5000:1:{tag}:UTC"),
            format!("c:10:4:5000:1:{tag}"),
            format!("c:10:1:5000:0:{tag}"),
            format!("c:0:1:5000:1:{tag}"),
            format!("c:10:1:5000:1:{tag}:"),
            format!("c:10:1:5000:1:{tag}UTC"),
            format!("c:10:1:5000:1:{tag}:{}", "z".repeat(MAX_NAME_LEN + 1)),
            format!("c:10:1:5000:1:{}", &tag[..7]),
            "c:10:1:5000:1".into(),
            format!("c:10:1:5000:{tag}"),
            // An id: 16 lowercase hex digits, after the tag, before a calendar window's zone.
            format!("h:10:1000:5000:1:{tag}0123456789abcde"),
            format!("h:10:1000:5000:1:{tag}0123456789abcdef0"),
            format!("h:10:1000:5000:1:{tag}0123456789ABCDEF"),
            format!("h:10:1000:5000:1:{tag}:0123456789abcdef"),
            format!("c:10:1:5000:1:{tag}0123456789abcdefUTC"),
            // An adaptive limit's: its bounds as ADAPT takes them.
            format!("d:10:600:2000:60000:0:{tag}"),
            format!("d:0:600:2000:60000:0:1:{tag}"),
            format!("d:601:600:2000:60000:0:1:{tag}"),
            format!("d:10:2001:2000:60000:0:1:{tag}"),
            format!("d:10:600:2000:0:0:1:{tag}"),
            format!("d:10:600:2000:1099511627777:0:1:{tag}"),
            format!("d:10:600:20000000000:60000:0:1:{tag}"),
            format!("d:10:600:2000:60000:1125899906842625:1:{tag}"),
            format!("d:10:600:2000:60000:0:0:{tag}"),
            format!("d:10:600:2000:60000:0:20000000000:{tag}"),
            format!("d:10:600:2000:60000:0:1:1:{tag}"),
        ] {
            assert_eq!(Reserved::parse(bad.as_bytes(), KEY), Err(Refused::Malformed), "{bad}");
        }
        assert_eq!(Refused::Malformed.message(), "ERR invalid reservation");
        assert_eq!(Refused::OtherKey.message(), "ERR the reservation is for another key");
    }
}
