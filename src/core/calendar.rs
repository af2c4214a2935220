//! Fixed windows laid on the clock rather than started by their first hit: `ALIGN`ed to multiples
//! of their length since the Unix epoch, or calendar windows (a day, an ISO week from Monday, a
//! month, a year) in a time zone. At a command's instant each resolves to the time left until its
//! window ends, and the fixed window's decision runs with that as the window: a new counter
//! expires exactly at the boundary, a running one keeps its expiry.
//!
//! Day numbers (days since 1970-01-01) carry the calendar arithmetic, the same for every zone; a
//! zone only maps an instant to its local day and a local midnight back to an instant. UTC and
//! fixed offsets do that in integers (as the Functions library does); named zones through jiff
//! and the IANA database bundled in it, so that a day of 23 or 25 hours ends when its zone says.

use std::sync::{Mutex, MutexGuard};

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::Timestamp;

const DAY_MS: i64 = 86_400_000;

/// A calendar window's unit (its number indexes the memo's windows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Day,
    /// ISO: from Monday 00:00.
    Week,
    Month,
    Year,
}

impl Unit {
    /// The unit a `window` argument names (any case), if it names one.
    pub fn named(word: &[u8]) -> Option<Unit> {
        // A window in seconds, the usual argument, is turned away by its first byte.
        if !word.first().is_some_and(u8::is_ascii_alphabetic) {
            return None;
        }
        [(Unit::Day, "day"), (Unit::Week, "week"), (Unit::Month, "month"), (Unit::Year, "year")]
            .into_iter()
            .find(|(_, name)| word.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(unit, _)| unit)
    }

    /// The unit numbered `code` (its order above, from 0), as a reservation writes it.
    pub fn from_code(code: i64) -> Option<Unit> {
        [Unit::Day, Unit::Week, Unit::Month, Unit::Year].get(usize::try_from(code).ok()?).copied()
    }
}

/// The time zone of calendar windows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Zone {
    /// UTC, or a fixed offset east of it, in ms.
    Offset(i64),
    /// A zone of the IANA database, by the name it was asked by.
    Named(Named),
}

/// A zone of the IANA database, and the name it was asked by (its place in the memo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    name: Box<[u8]>,
    tz: TimeZone,
}

/// Named zones asked for before, and per unit the window each last resolved to, as `[start,
/// end)` in Unix ms: a call inside a window seen before costs a comparison of names, not the
/// database's lookup and the zone's rules (two thirds of a HIT's instructions). A memo: the
/// answers are the same without it. Past `MEMO_ZONES` names it starts afresh.
struct Memo {
    name: Box<[u8]>,
    tz: TimeZone,
    windows: [(i64, i64); 4],
}

const MEMO_ZONES: usize = 64;

static MEMO: Mutex<Vec<Memo>> = Mutex::new(Vec::new());

fn memo() -> MutexGuard<'static, Vec<Memo>> {
    MEMO.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The longest zone name taken: the IANA database's longest is 32 bytes.
pub const MAX_NAME_LEN: usize = 64;

/// Why a `TZ` value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownZone;

impl Zone {
    /// `UTC` (any case), `+HH:MM` or `-HH:MM` (hours to 23, minutes to 59), or an IANA name.
    pub fn parse(text: &[u8]) -> Result<Zone, UnknownZone> {
        if text.eq_ignore_ascii_case(b"UTC") {
            return Ok(Zone::Offset(0));
        }
        if let [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] = *text {
            let two = |a: u8, b: u8| {
                (a.is_ascii_digit() && b.is_ascii_digit()).then(|| i64::from((a - b'0') * 10 + b - b'0'))
            };
            let (hours, minutes) = (two(h1, h2).ok_or(UnknownZone)?, two(m1, m2).ok_or(UnknownZone)?);
            if hours > 23 || minutes > 59 {
                return Err(UnknownZone);
            }
            let ms = (hours * 60 + minutes) * 60_000;
            return Ok(Zone::Offset(if sign == b'-' { -ms } else { ms }));
        }
        let mut memo = memo();
        if let Some(known) = memo.iter().find(|m| *m.name == *text) {
            return Ok(Zone::Named(Named { name: known.name.clone(), tz: known.tz.clone() }));
        }
        if text.len() > MAX_NAME_LEN {
            return Err(UnknownZone);
        }
        let name = std::str::from_utf8(text).map_err(|_| UnknownZone)?;
        let tz = TimeZone::get(name).map_err(|_| UnknownZone)?;
        if memo.len() == MEMO_ZONES {
            memo.clear();
        }
        memo.push(Memo { name: text.into(), tz: tz.clone(), windows: [(0, 0); 4] });
        Ok(Zone::Named(Named { name: text.into(), tz }))
    }

    /// The zone as `TZ` takes it back, written in `buf` for an offset: nothing for UTC, `+HH:MM`
    /// or `-HH:MM`, or the name it was asked by.
    pub fn text<'a>(&'a self, buf: &'a mut [u8; 6]) -> &'a [u8] {
        match self {
            Zone::Offset(0) => &[],
            Zone::Offset(ms) => {
                let minutes = ms.unsigned_abs() / 60_000;
                let (hours, minutes) = ((minutes / 60) as u8, (minutes % 60) as u8);
                *buf = [
                    if *ms < 0 { b'-' } else { b'+' },
                    b'0' + hours / 10,
                    b'0' + hours % 10,
                    b':',
                    b'0' + minutes / 10,
                    b'0' + minutes % 10,
                ];
                buf
            }
            Zone::Named(n) => &n.name,
        }
    }

    /// The local day `now_ms` falls in.
    fn day_of(&self, now_ms: i64) -> Option<i64> {
        let offset_ms = match self {
            Zone::Offset(ms) => *ms,
            Zone::Named(n) => i64::from(n.tz.to_offset(Timestamp::from_millisecond(now_ms).ok()?).seconds()) * 1000,
        };
        Some(now_ms.checked_add(offset_ms)?.div_euclid(DAY_MS))
    }

    /// The instant the local day `day` starts: its midnight, or where a clock change skips
    /// midnight, the first instant after the gap (where one repeats it, the first).
    fn start_of(&self, day: i64) -> Option<i64> {
        match self {
            Zone::Offset(ms) => day.checked_mul(DAY_MS)?.checked_sub(*ms),
            Zone::Named(Named { tz, .. }) => {
                let (y, m, d) = civil_from_days(day);
                let date = Date::new(i16::try_from(y).ok()?, m as i8, d as i8).ok()?;
                Some(tz.to_timestamp(date.to_datetime(jiff::civil::Time::midnight())).ok()?.as_millisecond())
            }
        }
    }
}

/// How a fixed window is laid on the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// This many ms from the hit that starts it (the usual window).
    Rolling(i64),
    /// This many ms, starting at multiples of that since the Unix epoch (ALIGN).
    Aligned(i64),
    /// A calendar unit in the call's zone.
    Calendar(Unit),
}

impl Window {
    /// The ms from `now_ms` until the window that starts at `now_ms` or runs then ends: all of it
    /// for a rolling window, what is left of it for the others (always >= 1). None when a
    /// calendar window's end is past what the calendar reaches (the year 9999).
    pub fn left(self, now_ms: i64, zone: &Zone) -> Option<i64> {
        match self {
            Window::Rolling(ms) => Some(ms),
            Window::Aligned(ms) => Some(ms - now_ms.rem_euclid(ms)),
            Window::Calendar(unit) => {
                let Zone::Named(named) = zone else {
                    return Some(calendar_window(now_ms, unit, zone)?.1 - now_ms);
                };
                let mut memo = memo();
                let known = memo.iter_mut().find(|m| m.name == named.name);
                let at = unit as usize;
                match known {
                    Some(m) if (m.windows[at].0..m.windows[at].1).contains(&now_ms) => Some(m.windows[at].1 - now_ms),
                    known => {
                        let window = calendar_window(now_ms, unit, zone)?;
                        if let Some(m) = known {
                            m.windows[at] = window;
                        }
                        Some(window.1 - now_ms)
                    }
                }
            }
        }
    }
}

/// The calendar window `[start, end)` that `now_ms` falls in, in Unix ms (`start <= now_ms <
/// end`). Windows follow each other with no gap: each ends where the next starts. The local date
/// names it, but for the hour a clock change repeats across midnight (Goose Bay fell back from
/// 00:01 to 23:01): the next day started at the first midnight, and that hour is in it.
fn calendar_window(now_ms: i64, unit: Unit, zone: &Zone) -> Option<(i64, i64)> {
    let mut day = this_start(zone.day_of(now_ms)?, unit);
    let mut window = (zone.start_of(day)?, zone.start_of(next_start(day, unit))?);
    // At most once; bounded all the same.
    for _ in 0..2 {
        if window.1 > now_ms {
            break;
        }
        day = next_start(day, unit);
        window = (window.1, zone.start_of(next_start(day, unit))?);
    }
    (window.0 <= now_ms && now_ms < window.1).then_some(window)
}

/// The first day of the calendar window `day` falls in.
fn this_start(day: i64, unit: Unit) -> i64 {
    match unit {
        Unit::Day => day,
        // 1970-01-01 was a Thursday: (day + 3) mod 7 days since Monday.
        Unit::Week => day - (day + 3).rem_euclid(7),
        Unit::Month => {
            let (y, m, _) = civil_from_days(day);
            days_from_civil(y, m, 1)
        }
        Unit::Year => days_from_civil(civil_from_days(day).0, 1, 1),
    }
}

/// The first day of the window after the one `day` falls in.
fn next_start(day: i64, unit: Unit) -> i64 {
    match unit {
        Unit::Day => day + 1,
        Unit::Week => this_start(day, unit) + 7,
        Unit::Month => {
            let (y, m, _) = civil_from_days(day);
            if m == 12 {
                days_from_civil(y + 1, 1, 1)
            } else {
                days_from_civil(y, m + 1, 1)
            }
        }
        Unit::Year => days_from_civil(civil_from_days(day).0 + 1, 1, 1),
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date (year, month, day) of a day number: the inverse of `days_from_civil`.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Unix ms of a UTC date and time.
    fn utc(y: i64, mo: i64, d: i64, h: i64, mi: i64) -> i64 {
        days_from_civil(y, mo, d) * DAY_MS + (h * 60 + mi) * 60_000
    }

    fn left(window: Window, now: i64, zone: &str) -> i64 {
        window.left(now, &Zone::parse(zone.as_bytes()).unwrap()).unwrap()
    }

    const HOUR: i64 = 3_600_000;

    #[test]
    fn a_zone_as_tz_takes_it_back() {
        for (asked, text) in [
            ("UTC", ""),
            ("utc", ""),
            ("+00:00", ""),
            ("-00:00", ""),
            ("+05:30", "+05:30"),
            ("-08:00", "-08:00"),
            ("-00:45", "-00:45"),
            ("+23:59", "+23:59"),
            ("Europe/Paris", "Europe/Paris"),
        ] {
            let zone = Zone::parse(asked.as_bytes()).unwrap();
            let mut buf = [0; 6];
            assert_eq!(zone.text(&mut buf), text.as_bytes(), "{asked}");
            let back = if text.is_empty() { Zone::Offset(0) } else { Zone::parse(text.as_bytes()).unwrap() };
            assert_eq!(back, zone);
        }
        assert_eq!(Zone::parse(&[b'a'; MAX_NAME_LEN + 1]), Err(UnknownZone));
        assert_eq!(Unit::from_code(2), Some(Unit::Month));
        assert_eq!(Unit::from_code(4), None);
        assert_eq!(Unit::from_code(-1), None);
    }

    #[test]
    fn day_numbers() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
    }

    #[test]
    fn aligned_windows_end_at_multiples_of_their_length() {
        assert_eq!(Window::Aligned(60_000).left(utc(2026, 5, 1, 10, 0) + 15_250, &Zone::Offset(0)), Some(44_750));
        assert_eq!(Window::Aligned(60_000).left(utc(2026, 5, 1, 10, 0), &Zone::Offset(0)), Some(60_000));
        assert_eq!(Window::Rolling(60_000).left(utc(2026, 5, 1, 10, 0) + 15_250, &Zone::Offset(0)), Some(60_000));
    }

    #[test]
    fn calendar_windows_in_utc() {
        let now = utc(2026, 1, 31, 23, 59) + 59_000;
        assert_eq!(left(Window::Calendar(Unit::Day), now, "UTC"), 1_000);
        assert_eq!(left(Window::Calendar(Unit::Month), now, "UTC"), 1_000);
        // February 2026 has 28 days.
        assert_eq!(left(Window::Calendar(Unit::Month), utc(2026, 2, 1, 0, 0), "utc"), 28 * DAY_MS);
        assert_eq!(left(Window::Calendar(Unit::Month), utc(2024, 2, 1, 0, 0), "UTC"), 29 * DAY_MS);
        assert_eq!(left(Window::Calendar(Unit::Year), utc(2026, 12, 31, 12, 0), "UTC"), 12 * HOUR);
        // 2026-12-02 is a Wednesday: the week ends at Monday 2026-12-07 00:00.
        assert_eq!(left(Window::Calendar(Unit::Week), utc(2026, 12, 2, 0, 0), "UTC"), 5 * DAY_MS);
        assert_eq!(left(Window::Calendar(Unit::Week), utc(2026, 12, 7, 0, 0), "UTC"), 7 * DAY_MS);
        assert_eq!(left(Window::Calendar(Unit::Week), utc(2026, 12, 6, 23, 0), "UTC"), HOUR);
    }

    #[test]
    fn fixed_offsets() {
        // 2026-01-31 20:00 UTC is 2026-02-01 01:30 at +05:30: February's month runs to March 1st
        // 00:00 there, 2026-02-28 18:30 UTC.
        let now = utc(2026, 1, 31, 20, 0);
        assert_eq!(left(Window::Calendar(Unit::Month), now, "+05:30"), utc(2026, 2, 28, 18, 30) - now);
        assert_eq!(left(Window::Calendar(Unit::Day), now, "-08:00"), utc(2026, 2, 1, 8, 0) - now);
        for bad in ["+24:00", "+05:60", "+5:30", "05:30", "+05-30", "+0530", "", "Nowhere/City", "\u{ff}"] {
            assert_eq!(Zone::parse(bad.as_bytes()), Err(UnknownZone), "{bad}");
        }
    }

    #[test]
    fn named_zones_follow_daylight_saving() {
        // New York springs forward on 2026-03-08 (a day of 23 hours) and falls back on 2026-11-01
        // (25 hours).
        let spring = utc(2026, 3, 8, 5, 0); // midnight EST
        assert_eq!(left(Window::Calendar(Unit::Day), spring, "America/New_York"), 23 * HOUR);
        let fall = utc(2026, 11, 1, 4, 0); // midnight EDT
        assert_eq!(left(Window::Calendar(Unit::Day), fall, "America/New_York"), 25 * HOUR);
        // March 2026 in New York: 31 days less the hour skipped.
        let march = utc(2026, 3, 1, 5, 0);
        assert_eq!(left(Window::Calendar(Unit::Month), march, "America/New_York"), 31 * DAY_MS - HOUR);
        // Santiago skips midnight when it springs forward (2026-09-06): that day starts at 01:00.
        let before = utc(2026, 9, 6, 4, 0) - 1; // 23:59:59.999 on the 5th at -04:00
        assert_eq!(left(Window::Calendar(Unit::Day), before, "America/Santiago"), 1);
        assert_eq!(left(Window::Calendar(Unit::Day), before + 1, "America/Santiago"), 23 * HOUR);
        // It falls back from 24:00 to 23:00 on 2026-04-05 (03:00Z): Saturday's last hour repeats,
        // and Sunday starts at its only midnight, 04:00Z.
        let repeated = utc(2026, 4, 5, 3, 30);
        assert_eq!(left(Window::Calendar(Unit::Day), repeated, "America/Santiago"), 30 * 60_000);
        // Goose Bay fell back from 00:01 to 23:01 on 2008-11-02 (03:01Z): Sunday had started at the
        // first midnight (03:00Z), so the Saturday hour the clock repeats is Sunday's, which lasts
        // until Monday's midnight (04:00Z).
        let after_midnight = utc(2008, 11, 2, 3, 30);
        assert_eq!(left(Window::Calendar(Unit::Day), after_midnight, "America/Goose_Bay"), 24 * HOUR + 30 * 60_000);
    }

    #[test]
    fn the_memo_answers_as_the_rules_do() {
        // Days around New York's changes, asked in an order that moves back and forth.
        let start = utc(2026, 3, 7, 0, 0);
        let times: Vec<i64> = (0..200).map(|i| start + (i * 7_919 % 200) * 1_800_000 + i).collect();
        for unit in [Unit::Day, Unit::Week, Unit::Month, Unit::Year] {
            for &now in &times {
                let zone = Zone::parse(b"America/New_York").unwrap();
                let fresh = calendar_window(now, unit, &zone).unwrap().1 - now;
                assert_eq!(Window::Calendar(unit).left(now, &zone), Some(fresh), "{unit:?} at {now}");
            }
        }
    }

    proptest! {
        #[test]
        fn offsets_agree_with_jiff(now in 0i64..4_102_444_800_000, minutes in -23 * 60i64..=23 * 60, unit in 0..4usize) {
            let unit = [Unit::Day, Unit::Week, Unit::Month, Unit::Year][unit];
            let offset = Zone::Offset(minutes * 60_000);
            let tz = TimeZone::fixed(jiff::tz::Offset::from_seconds(minutes as i32 * 60).unwrap());
            let named = Zone::Named(Named { name: format!("fixed{minutes}").into_bytes().into(), tz });
            let left = Window::Calendar(unit).left(now, &offset).unwrap();
            prop_assert_eq!(Some(left), Window::Calendar(unit).left(now, &named));
            prop_assert!(left >= 1);
        }

        #[test]
        fn day_numbers_round_trip(day in -1_000_000i64..3_000_000) {
            let (y, m, d) = civil_from_days(day);
            prop_assert_eq!(days_from_civil(y, m, d), day);
        }
    }
}
