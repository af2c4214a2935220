//! One AUDIT or REPAIR walk: which keys of the caller's database under a prefix are counters
//! without TTL (and, for REPAIR, giving each a window), as the caller's ACL user may see them.

use crate::core::args::WalkArgs;
use crate::core::audit_filter::{classify, Seen, Tally};
use crate::redis::acl::AclUser;
use crate::redis::call::{Call, Error};
use crate::redis::ctx::Ctx;
use crate::redis::leaked::{heal_if_leaked, limiter_at};
use crate::redis::walk::{self, ScannedKey, Walk};
use crate::redis::{clock, config, stats};

/// The `ratelimit.audit-limit` config: names listed when the call gives no LIMIT.
pub fn default_names() -> usize {
    usize::try_from(config::AUDIT_LIMIT.get()).unwrap_or(0)
}

/// Starts the walk of `args` for `call` (`command` names it in errors); the caller is answered
/// when it is over.
pub fn start(call: &Call, command: &str, args: &WalkArgs) -> Result<(), Error> {
    let user_name = call.user_name().ok_or("ERR ratelimit: cannot tell the caller's ACL user")?;
    let sweep = Sweep {
        prefix: args.prefix.to_vec(),
        repair_window_ms: args.repair_window_ms,
        user_name,
        user: None,
        suspects: Vec::new(),
        tally: Tally::new(args.names),
    };
    walk::start(call, command, Box::new(sweep))?;
    if args.repair_window_ms.is_some() { &stats::REPAIRS } else { &stats::AUDITS }.add(1);
    Ok(())
}

struct Sweep {
    prefix: Vec<u8>,
    /// `Some` for REPAIR: the window given to each leaked counter.
    repair_window_ms: Option<i64>,
    user_name: Vec<u8>,
    /// The caller's ACL user, looked up again each slice (it may be changed or deleted between
    /// slices) and let go at the slice's end.
    user: Option<AclUser>,
    /// Names of short strings without TTL seen in the current scan step; their values are read
    /// after the step, where commands may run.
    suspects: Vec<Vec<u8>>,
    tally: Tally,
}

impl Walk for Sweep {
    fn begin_slice(&mut self, ctx: &Ctx) -> Result<(), String> {
        if self.repair_window_ms.is_some() && ctx.is_replica() {
            return Err("ERR RATELIMIT.REPAIR stopped: this server became a replica".into());
        }
        self.user = Some(
            AclUser::named(ctx, &self.user_name)
                .ok_or("ERR ratelimit: the caller's ACL user was deleted during the walk")?,
        );
        Ok(())
    }

    fn visit(&mut self, key: &ScannedKey) {
        // Keys the caller may not see are not counted at all, not even as scanned; REPAIR also
        // needs to be allowed to write them.
        let write = self.repair_window_ms.is_some();
        if !self.user.as_ref().is_some_and(|user| user.may(key, write)) {
            return;
        }
        let name = key.name();
        let seen = classify(name, &self.prefix, &mut { key });
        self.tally.count(seen);
        stats::KEYS_SCANNED.add(1);
        if seen == Seen::Suspect {
            self.suspects.push(name.to_vec());
        }
    }

    fn settle(&mut self, ctx: &Ctx) {
        for name in std::mem::take(&mut self.suspects) {
            match self.repair_window_ms {
                None => {
                    if limiter_at(ctx, &name).is_some() {
                        self.tally.found(&name);
                    }
                }
                Some(window_ms) => {
                    if heal_if_leaked(ctx, &name, window_ms, clock::wall_ms()) && self.tally.found(&name) {
                        stats::REPAIRED.add(1);
                    }
                }
            }
        }
    }

    fn end_slice(&mut self) {
        self.user = None;
    }

    fn reply(&self, ctx: &Ctx) {
        let found = if self.repair_window_ms.is_some() { c"repaired" } else { c"leaked" };
        let t = &self.tally;
        ctx.reply_map(4);
        for (field, value) in [(c"scanned", t.scanned), (c"matched", t.matched), (found, t.found)] {
            ctx.reply_simple(field);
            ctx.reply_integer(value as i64);
        }
        ctx.reply_simple(c"keys");
        ctx.reply_array(t.names.len());
        for name in &t.names {
            ctx.reply_bulk(name);
        }
    }
}
