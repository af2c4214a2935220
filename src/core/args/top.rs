//! `RATELIMIT.TOP`'s arguments.

use crate::core::top::View;

use super::error::ArgError;
use super::read::*;

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
    use crate::core::args::testing::words;

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
}
