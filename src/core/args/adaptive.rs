//! The adaptive limit's arguments: `RATELIMIT.ADAPT` and `RATELIMIT.REPORT`.

use crate::core::adaptive::{Bounds, Outcome, Report, MAX_SCALED, MAX_SPAN_MS};
use crate::core::decimal::parse_i64;

use super::error::ArgError;
use super::read::*;

/// `RATELIMIT.ADAPT key floor start ceiling window [COST cost] [MS] [PARTIAL] [RESERVE] [TURN]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptArgs {
    pub bounds: Bounds,
    pub cost: i64,
    pub partial: bool,
    pub reserve: bool,
    pub turn: bool,
}

/// `key floor start ceiling window [COST cost] [MS] [PARTIAL] [RESERVE] [TURN]`, after the command name.
pub fn parse_adapt<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<AdaptArgs, ArgError> {
    let mut args = args.into_iter();
    let (Some(_key), Some(floor), Some(start), Some(ceiling), Some(window)) =
        (args.next(), args.next(), args.next(), args.next(), args.next())
    else {
        return Err(ArgError::Arity("ratelimit.adapt"));
    };
    let (floor, start, ceiling) = (positive(floor, "floor")?, positive(start, "start")?, positive(ceiling, "ceiling")?);
    let spec = [
        Opt { name: "COST", values: 1 },
        Opt { name: "MS", values: 0 },
        Opt { name: "PARTIAL", values: 0 },
        Opt { name: "RESERVE", values: 0 },
        Opt { name: "TURN", values: 0 },
    ];
    let [cost, ms, partial, reserve, turn] = options(args, spec, "COST, MS, PARTIAL, RESERVE or TURN")?;
    let cost = cost.map_or(Ok(1), |c| positive(c, "COST"))?;
    let window_ms = window_ms(window, ms.is_some()).and_then(|w| match w > MAX_SPAN_MS {
        true => Err(ArgError::TooLarge("window")),
        false => Ok(w),
    })?;
    if !(floor <= start && start <= ceiling) {
        return Err(ArgError::Bounds);
    }
    if ceiling > MAX_SCALED / window_ms {
        return Err(ArgError::TooLarge("ceiling * window"));
    }
    if cost > MAX_SCALED / window_ms {
        return Err(ArgError::TooLarge("COST * window"));
    }
    let bounds = Bounds { floor, start, ceiling, window_ms };
    Ok(AdaptArgs { bounds, cost, partial: partial.is_some(), reserve: reserve.is_some(), turn: turn.is_some() })
}

/// An integer >= `min` and at most `max`, named `name`.
fn within(text: &[u8], name: &'static str, min: i64, max: i64) -> Result<i64, ArgError> {
    let value = parse_i64(text).filter(|&v| v >= min);
    let value = value.ok_or(if min == 0 { ArgError::Negative(name) } else { ArgError::NotPositive(name) })?;
    (value <= max).then_some(value).ok_or(ArgError::TooLarge(name))
}

/// `key OK|THROTTLED [RETRY ms] [LIMIT limit] [REMAINING remaining RESET ms] [AGE ms]`, after the
/// command name.
pub fn parse_report<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<Report, ArgError> {
    let mut args = args.into_iter();
    let (Some(_key), Some(outcome)) = (args.next(), args.next()) else {
        return Err(ArgError::Arity("ratelimit.report"));
    };
    let outcome = match outcome {
        o if o.eq_ignore_ascii_case(b"OK") => Outcome::Ok,
        o if o.eq_ignore_ascii_case(b"THROTTLED") => Outcome::Throttled,
        _ => return Err(ArgError::Outcome),
    };
    let spec = [
        Opt { name: "RETRY", values: 1 },
        Opt { name: "LIMIT", values: 1 },
        Opt { name: "REMAINING", values: 1 },
        Opt { name: "RESET", values: 1 },
        Opt { name: "AGE", values: 1 },
    ];
    let [retry, limit, remaining, reset, age] = options(args, spec, "RETRY, LIMIT, REMAINING, RESET or AGE")?;
    let retry_ms = retry.map(|r| within(r, "RETRY", 0, MAX_SPAN_MS)).transpose()?;
    let limit = limit.map(|l| within(l, "LIMIT", 1, MAX_SCALED)).transpose()?;
    let remaining = remaining.map(|r| within(r, "REMAINING", 0, MAX_SCALED)).transpose()?;
    let reset = reset.map(|r| within(r, "RESET", 0, MAX_SPAN_MS)).transpose()?;
    let age_ms = age.map(|a| within(a, "AGE", 0, MAX_SPAN_MS)).transpose()?;
    let remaining = match (remaining, reset) {
        (Some(left), Some(reset)) => Some((left, reset)),
        (Some(_), None) => return Err(ArgError::Needs("REMAINING", "RESET")),
        (None, Some(_)) => return Err(ArgError::Needs("RESET", "REMAINING")),
        (None, None) => None,
    };
    if retry_ms.is_some() && outcome == Outcome::Ok {
        return Err(ArgError::Needs("RETRY", "THROTTLED"));
    }
    Ok(Report { outcome, retry_ms, limit, remaining, age_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapt(line: &str) -> Result<AdaptArgs, String> {
        parse_adapt(line.split(' ').map(str::as_bytes)).map_err(ArgError::message)
    }

    fn report(line: &str) -> Result<Report, String> {
        parse_report(line.split(' ').map(str::as_bytes)).map_err(ArgError::message)
    }

    #[test]
    fn adapt_takes_bounds_a_window_and_a_cost() {
        let a = adapt("k 10 100 1000 60 COST 3 PARTIAL").unwrap();
        assert_eq!(a.bounds, Bounds { floor: 10, start: 100, ceiling: 1000, window_ms: 60_000 });
        assert_eq!((a.cost, a.partial, a.reserve), (3, true, false));
        assert!(adapt("k 10 100 1000 60 reserve").unwrap().reserve);
        assert!(adapt("k 10 100 1000 60 turn").unwrap().turn);
        assert_eq!(adapt("k 1 1 1 250 ms").unwrap().bounds.window_ms, 250);
        for (line, error) in [
            ("k 1 2 3", "ERR wrong number of arguments for 'ratelimit.adapt' command"),
            ("k 0 2 3 60", "ERR floor must be an integer >= 1"),
            ("k 1 x 3 60", "ERR start must be an integer >= 1"),
            ("k 1 2 -3 60", "ERR ceiling must be an integer >= 1"),
            ("k 1 2 3 0", "ERR window must be an integer >= 1"),
            ("k 1 2 3 60 COST 0", "ERR COST must be an integer >= 1"),
            ("k 1 2 3 60 TOKENS 1", "ERR syntax error: unknown option (expected COST, MS, PARTIAL, RESERVE or TURN)"),
            ("k 1 2 3 60 RESERVE RESERVE", "ERR syntax error: RESERVE given more than once"),
            ("k 1 2 3 60 TURN TURN", "ERR syntax error: TURN given more than once"),
            ("k 1 2 3 60 MS MS", "ERR syntax error: MS given more than once"),
            ("k 3 2 3 60", "ERR floor <= start <= ceiling must hold"),
            ("k 1 4 3 60", "ERR floor <= start <= ceiling must hold"),
            ("k 1 1 1 1099511627777 MS", "ERR window is too large"),
            ("k 1 1 20000000000 60", "ERR ceiling * window is too large"),
            ("k 1 1 1 60 COST 20000000000", "ERR COST * window is too large"),
        ] {
            assert_eq!(adapt(line).unwrap_err(), error, "{line}");
        }
    }

    #[test]
    fn report_takes_an_outcome_and_the_providers_figures() {
        let r = report("k throttled RETRY 1500 LIMIT 60 REMAINING 0 RESET 20000").unwrap();
        assert_eq!(
            r,
            Report {
                outcome: Outcome::Throttled,
                retry_ms: Some(1500),
                limit: Some(60),
                remaining: Some((0, 20_000)),
                age_ms: None
            }
        );
        assert_eq!(
            report("k OK").unwrap(),
            Report { outcome: Outcome::Ok, retry_ms: None, limit: None, remaining: None, age_ms: None }
        );
        assert_eq!(report("k THROTTLED age 2500").unwrap().age_ms, Some(2_500));
        for (line, error) in [
            ("k", "ERR wrong number of arguments for 'ratelimit.report' command"),
            ("k 429", "ERR outcome must be OK or THROTTLED"),
            ("k OK RETRY 5", "ERR syntax error: RETRY needs THROTTLED"),
            ("k THROTTLED RETRY -1", "ERR RETRY must be an integer >= 0"),
            ("k THROTTLED RETRY 1099511627777", "ERR RETRY is too large"),
            ("k OK LIMIT 0", "ERR LIMIT must be an integer >= 1"),
            ("k OK REMAINING 3", "ERR syntax error: REMAINING needs RESET"),
            ("k OK RESET 3", "ERR syntax error: RESET needs REMAINING"),
            ("k OK REMAINING", "ERR syntax error: REMAINING needs a value"),
            ("k OK COST 1", "ERR syntax error: unknown option (expected RETRY, LIMIT, REMAINING, RESET or AGE)"),
            ("k OK AGE -1", "ERR AGE must be an integer >= 0"),
            ("k OK AGE 1099511627777", "ERR AGE is too large"),
            ("k OK AGE 1 AGE 2", "ERR syntax error: AGE given more than once"),
        ] {
            assert_eq!(report(line).unwrap_err(), error, "{line}");
        }
    }
}
