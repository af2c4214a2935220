//! What an LLM provider's answer says about its limits, read from its status and headers with no
//! I/O: OpenAI's (and Azure OpenAI's) `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, the
//! resets Go durations (`6m0s`); Anthropic's `anthropic-ratelimit-{requests,tokens}-*`, the resets
//! RFC 3339 instants; and the wait: `retry-after-ms`, then `retry-after` in seconds or as an HTTP
//! date. A figure that does not parse is left out, never guessed; a wait of 0 or less (Azure has
//! sent -1) is none. The repository's testkit/conformance/provider_answers.json holds every client
//! to the same readings.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One measure's figures as the provider stated them (`None`: not stated).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Stated {
    /// The stated limit.
    pub limit: Option<u64>,
    /// What the provider says remains.
    pub remaining: Option<u64>,
    /// Until the provider's window resets.
    pub reset_after: Option<Duration>,
}

/// What a provider's answer says about its limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ProviderAnswer {
    /// A 429 or a 503.
    pub throttled: bool,
    /// How long the provider asks callers to wait; `None` when it asks nothing.
    pub retry_after: Option<Duration>,
    /// The requests' figures.
    pub requests: Stated,
    /// The tokens' figures (Anthropic's input tokens where it states no tokens).
    pub tokens: Stated,
}

fn whole(text: &str) -> Option<u64> {
    let t = text.trim();
    (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())).then(|| t.parse().ok()).flatten()
}

/// A Go duration (`1s`, `6m0s`, `12ms`, `1h2m3.5s`, `0`).
fn go_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    if matches!(t, "0" | "+0" | "-0") {
        return Some(Duration::ZERO);
    }
    let mut rest = t.strip_prefix('+').unwrap_or(t);
    if rest.is_empty() {
        return None;
    }
    let mut nanos = 0f64;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        rest = &rest[number_len..];
        let (unit, len) =
            [("ns", 1e0), ("us", 1e3), ("µs", 1e3), ("μs", 1e3), ("ms", 1e6), ("s", 1e9), ("m", 60e9), ("h", 3600e9)]
                .iter()
                .find(|(u, _)| rest.starts_with(u))
                .map(|(u, scale)| (*scale, u.len()))?;
        nanos += value * unit;
        rest = &rest[len..];
    }
    Some(Duration::from_nanos(nanos.round() as u64))
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
}

fn digits(text: &str, at: usize, len: usize) -> Option<i64> {
    let part = text.get(at..at + len)?;
    part.bytes().all(|b| b.is_ascii_digit()).then(|| part.parse().ok()).flatten()
}

/// An RFC 3339 instant, in ms since the Unix epoch.
fn rfc3339_ms(text: &str) -> Option<i64> {
    let t = text.trim();
    let b = t.as_bytes();
    let sep = |i: usize, c: &[u8]| b.get(i).is_some_and(|x| c.contains(x));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (y, mo, d, h, mi, s) =
        (digits(t, 0, 4)?, digits(t, 5, 2)?, digits(t, 8, 2)?, digits(t, 11, 2)?, digits(t, 14, 2)?, digits(t, 17, 2)?);
    let mut at = 19;
    let mut fraction_ms = 0i64;
    if b.get(at) == Some(&b'.') {
        let end = at + 1 + t[at + 1..].bytes().take_while(u8::is_ascii_digit).count();
        if end == at + 1 {
            return None;
        }
        let frac = &t[at + 1..end];
        fraction_ms = format!("{frac:0<3}")[..3].parse().ok()?;
        at = end;
    }
    let offset_min = match t.get(at..)? {
        "Z" | "z" => 0,
        zone if zone.len() == 6 && (zone.starts_with('+') || zone.starts_with('-')) && &zone[3..4] == ":" => {
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            sign * (digits(zone, 1, 2)? * 60 + digits(zone, 4, 2)?)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    Some(((days * 86_400 + h * 3_600 + mi * 60 + s - offset_min * 60) * 1_000) + fraction_ms)
}

/// An HTTP date (`Tue, 01 Dec 2026 12:00:30 GMT`), in ms since the Unix epoch.
fn http_date_ms(text: &str) -> Option<i64> {
    let t = text.trim();
    let rest = t.split_once(", ")?.1;
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let m = MONTHS.iter().position(|x| x == month)? as i64 + 1;
    let (d, y) = (digits(day, 0, day.len())?, digits(year, 0, 4)?);
    let (h, mi, s) = (digits(time, 0, 2)?, digits(time, 3, 2)?, digits(time, 6, 2)?);
    Some((days_from_civil(y, m, d) * 86_400 + h * 3_600 + mi * 60 + s) * 1_000)
}

fn after(at_ms: i64, now_ms: i64) -> Duration {
    Duration::from_millis(at_ms.saturating_sub(now_ms).max(0) as u64)
}

fn wait(h: &HashMap<String, &str>, now_ms: i64) -> Option<Duration> {
    if let Some(ms) = h.get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()).filter(|v| v.is_finite()) {
        return (ms > 0.0).then(|| Duration::from_secs_f64(ms / 1_000.0));
    }
    let text = h.get("retry-after")?.trim();
    let number =
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.') && text.matches('.').count() <= 1;
    if number {
        let seconds: f64 = text.parse().ok()?;
        return (seconds > 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let at = http_date_ms(text)?;
    (at > now_ms).then(|| after(at, now_ms))
}

fn stated(h: &HashMap<String, &str>, measure: &str, now_ms: i64) -> Stated {
    let openai = ["limit", "remaining", "reset"].map(|f| h.get(&format!("x-ratelimit-{f}-{measure}")).copied());
    if openai.iter().any(Option::is_some) {
        let [limit, remaining, reset] = openai;
        return Stated {
            limit: limit.and_then(whole),
            remaining: remaining.and_then(whole),
            reset_after: reset.and_then(go_duration),
        };
    }
    let names: &[&str] = if measure == "requests" { &["requests"] } else { &["tokens", "input-tokens"] };
    for name in names {
        let said = ["limit", "remaining", "reset"].map(|f| h.get(&format!("anthropic-ratelimit-{name}-{f}")).copied());
        if said.iter().any(Option::is_some) {
            let [limit, remaining, reset] = said;
            let reset_after = reset.and_then(rfc3339_ms).map(|at| after(at, now_ms));
            return Stated { limit: limit.and_then(whole), remaining: remaining.and_then(whole), reset_after };
        }
    }
    Stated::default()
}

/// Reads a provider's answer: `status` its HTTP status (`None`: no answer, as a timeout), its
/// headers as (name, value) pairs in any case (an `http::HeaderMap`'s, mapped to text). `now`
/// dates Anthropic's resets and an HTTP-date Retry-After.
pub fn read_answer<'a>(
    status: Option<u16>,
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    now: SystemTime,
) -> ProviderAnswer {
    let mut h = HashMap::new();
    for (name, value) in headers {
        h.entry(name.to_ascii_lowercase()).or_insert(value);
    }
    let now_ms = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    ProviderAnswer {
        throttled: matches!(status, Some(429 | 503)),
        retry_after: wait(&h, now_ms),
        requests: stated(&h, "requests", now_ms),
        tokens: stated(&h, "tokens", now_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cases every client reads alike.
    #[test]
    fn a_providers_answer_reads_as_every_client_reads_it() {
        let text = include_str!("../../../testkit/conformance/provider_answers.json");
        let cases: Vec<serde_json::Value> = serde_json::from_str(text).unwrap();
        for c in cases {
            let name = c["name"].as_str().unwrap();
            let now = rfc3339_ms(c["now"].as_str().unwrap_or("2026-12-01T12:00:00Z")).unwrap();
            let now = UNIX_EPOCH + Duration::from_millis(now as u64);
            let headers: Vec<(&str, &str)> =
                c["headers"].as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap())).collect();
            let status = c["status"].as_u64().map(|s| s as u16);
            let a = read_answer(status, headers, now);
            let ms = |d: Option<Duration>| d.map(|d| (d.as_secs_f64() * 1_000.0).round() as u64);
            assert_eq!(a.throttled, c["throttled"].as_bool().unwrap(), "{name}");
            assert_eq!(ms(a.retry_after), c["retry_after_ms"].as_u64(), "{name}");
            for (s, figures) in [(a.requests, &c["requests"]), (a.tokens, &c["tokens"])] {
                let want: Vec<Option<u64>> =
                    figures.as_array().unwrap().iter().map(serde_json::Value::as_u64).collect();
                assert_eq!(vec![s.limit, s.remaining, ms(s.reset_after)], want, "{name}");
            }
        }
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration("1h2m3.5s"), Some(Duration::from_millis(3_723_500)));
        assert_eq!(go_duration("250us"), Some(Duration::from_micros(250)));
        for junk in ["", "5", "1d", "-1s", "s", "1s2"] {
            assert_eq!(go_duration(junk), None, "{junk}");
        }
    }
}
