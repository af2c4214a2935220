//! The codec: one builder per call, with no I/O. Each checks its arguments as the module does
//! (and words its refusals alike), gives the module's command and the Functions library's
//! function, and reads the reply; the limiter sends them. By command family, as the module's
//! `src/core/args/`.

pub(crate) mod adaptive;
pub(crate) mod gcra;
pub(crate) mod lease;
pub(crate) mod settle;
pub(crate) mod top;
pub(crate) mod window;

#[cfg(test)]
mod conformance;

use std::time::Duration;

use crate::error::{invalid, unexpected_reply};
use crate::results::{Decision, Grant, Reservation, FOREVER};
use crate::{Error, Reply};

/// How a built call's reply reads.
pub(crate) type Parse<T> = Box<dyn Fn(&Reply) -> Result<T, Error> + Send + Sync>;

/// One call, built and checked but not sent.
pub(crate) struct Command<T> {
    /// The module's command (`RATELIMIT.HIT`).
    pub(crate) name: &'static str,
    /// The library's function (`None` for the module's own commands, such as TOP).
    pub(crate) function: Option<&'static str>,
    pub(crate) keys: Vec<String>,
    pub(crate) args: Vec<String>,
    /// The module's form names its keys' count first (HITALL).
    pub(crate) numkeys: bool,
    /// The library's function is flagged no-writes (`FCALL_RO`): PEEK.
    pub(crate) read_only: bool,
    pub(crate) parse: Parse<T>,
}

impl<T> Command<T> {
    pub(crate) fn new(
        name: &'static str,
        function: Option<&'static str>,
        keys: Vec<String>,
        args: Vec<String>,
        parse: impl Fn(&Reply) -> Result<T, Error> + Send + Sync + 'static,
    ) -> Command<T> {
        Command { name, function, keys, args, numkeys: false, read_only: false, parse: Box::new(parse) }
    }

    /// The call as the module takes it.
    pub(crate) fn module_args(&self) -> Vec<String> {
        let mut args = vec![self.name.to_string()];
        if self.numkeys {
            args.push(self.keys.len().to_string());
        }
        args.extend(self.keys.iter().cloned());
        args.extend(self.args.iter().cloned());
        args
    }

    /// The call as FCALL (FCALL_RO) to the library; `None` for a module-only command.
    pub(crate) fn library_args(&self) -> Option<Vec<String>> {
        let function = self.function?;
        let fcall = if self.read_only { "FCALL_RO" } else { "FCALL" };
        let mut args = vec![fcall.to_string(), function.to_string(), self.keys.len().to_string()];
        args.extend(self.keys.iter().cloned());
        args.extend(self.args.iter().cloned());
        Some(args)
    }

    /// The same call with `flags` appended, its reply read by `read` (which may read parts of it
    /// with the call's own reader).
    pub(crate) fn then<U>(
        self,
        flags: &[&str],
        read: impl Fn(&Reply, &Parse<T>) -> Result<U, Error> + Send + Sync + 'static,
    ) -> Command<U>
    where
        T: 'static,
    {
        let Command { name, function, keys, mut args, numkeys, read_only, parse } = self;
        args.extend(flags.iter().map(|f| f.to_string()));
        Command { name, function, keys, args, numkeys, read_only, parse: Box::new(move |reply| read(reply, &parse)) }
    }
}

/// The longest window or lease the module takes, in ms (half of i64).
pub(crate) const MAX_MS: u128 = (i64::MAX / 2) as u128;

/// A limit or count: 1 to i64's largest.
pub(crate) fn positive(n: u64, name: &str) -> Result<i64, Error> {
    i64::try_from(n).ok().filter(|&n| n >= 1).ok_or_else(|| invalid(format!("{name} must be an integer >= 1")))
}

/// A cost or tokens: nonzero, within i64.
pub(crate) fn nonzero(n: u64, name: &str) -> Result<i64, Error> {
    i64::try_from(n).ok().filter(|&n| n != 0).ok_or_else(|| invalid(format!("{name} must be a nonzero integer")))
}

/// A window or lease as sent: whole seconds, or milliseconds with MS.
pub(crate) fn length(d: Duration, name: &str) -> Result<(String, bool), Error> {
    let ms = d.as_millis();
    if !d.subsec_nanos().is_multiple_of(1_000_000) || ms < 1 {
        return Err(invalid(format!("{name} must be a whole number of milliseconds >= 1ms")));
    }
    if ms > MAX_MS {
        return Err(invalid(format!("{name} is too large")));
    }
    Ok(if ms.is_multiple_of(1000) { ((ms / 1000).to_string(), false) } else { (ms.to_string(), true) })
}

/// `COST n` (`TOKENS n`), left out for 1.
pub(crate) fn counted(n: i64, name: &str) -> Vec<String> {
    if n == 1 {
        Vec::new()
    } else {
        vec![name.to_string(), n.to_string()]
    }
}

/// A reply's `n` integers, if it is an array of exactly that many.
pub(crate) fn integers(reply: &Reply, n: usize) -> Option<Vec<i64>> {
    let items = reply.as_array().filter(|items| items.len() == n)?;
    items.iter().map(Reply::as_int).collect()
}

/// A reply's milliseconds: negative means never.
pub(crate) fn ms(n: i64) -> Duration {
    u64::try_from(n).map(Duration::from_millis).unwrap_or(FOREVER)
}

/// `call` with PARTIAL: its decision (read from its first `numbers` elements by `decision`, or by
/// the call's own reader), then the count granted.
pub(crate) fn granting(call: Command<Decision>, decision: Option<Parse<Decision>>, numbers: usize) -> Command<Grant> {
    let what = call.name;
    call.then(&["PARTIAL"], move |reply, own| {
        let items =
            reply.as_array().filter(|items| items.len() == numbers + 1).ok_or_else(|| unexpected_reply(what, reply))?;
        let granted = items[numbers].as_int().ok_or_else(|| unexpected_reply(what, reply))?;
        let read = decision.as_ref().unwrap_or(own);
        Ok(Grant { decision: read(&Reply::Array(items[..numbers].to_vec()))?, granted })
    })
}

/// `call` with RESERVE: its decision, and the reservation that ends the reply.
pub(crate) fn reserving(call: Command<Decision>, amount: i64, name: &str) -> Result<Command<Reservation>, Error> {
    if amount < 1 {
        return Err(invalid(format!("RESERVE needs {name} >= 1")));
    }
    let key = call.keys[0].clone();
    let what = call.name;
    Ok(call.then(&["RESERVE"], move |reply, decision| {
        let (token, numbers) = split_last(reply).ok_or_else(|| unexpected_reply(what, reply))?;
        Ok(Reservation { decision: decision(&numbers)?, key: key.clone(), token, amount })
    }))
}

/// `call` with PARTIAL and RESERVE: as many of `amount` as the limit has room for, at least one,
/// and a reservation of what was granted. The reply's first `numbers` elements are the decision
/// (read by `decision`, or the call's own reader), then the count granted and the reservation.
pub(crate) fn reserving_up_to(
    call: Command<Decision>,
    amount: i64,
    name: &str,
    decision: Option<Parse<Decision>>,
    numbers: usize,
) -> Result<Command<Reservation>, Error> {
    if amount < 1 {
        return Err(invalid(format!("PARTIAL needs {name} >= 1")));
    }
    let key = call.keys[0].clone();
    let what = call.name;
    Ok(call.then(&["PARTIAL", "RESERVE"], move |reply, own| {
        let items =
            reply.as_array().filter(|items| items.len() == numbers + 2).ok_or_else(|| unexpected_reply(what, reply))?;
        let granted = items[numbers].as_int().ok_or_else(|| unexpected_reply(what, reply))?;
        let read = decision.as_ref().unwrap_or(own);
        let decision = read(&Reply::Array(items[..numbers].to_vec()))?;
        let token = items[numbers + 1].as_text().map(str::to_string);
        Ok(Reservation { decision, key: key.clone(), token, amount: granted })
    }))
}

/// A reply's last element as a reservation's token (none when denied: a nil), and the elements
/// before it.
pub(crate) fn split_last(reply: &Reply) -> Option<(Option<String>, Reply)> {
    let (last, numbers) = reply.as_array()?.split_last()?;
    Some((last.as_text().map(str::to_string), Reply::Array(numbers.to_vec())))
}
