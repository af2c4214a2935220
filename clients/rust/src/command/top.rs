//! RATELIMIT.TOP's call (the module only).

use super::{positive, Command};
use crate::error::unexpected_reply;
use crate::limits::{TopOptions, TopView};
use crate::results::TopEntry;
use crate::Error;

/// RATELIMIT.TOP: the keys this node denied most (or admitted the most cost for, or would have
/// denied in shadow mode) lately, each count with its error bound.
pub(crate) fn top(o: &TopOptions) -> Result<Command<Vec<TopEntry>>, Error> {
    let view = match o.view {
        TopView::Denied => "DENIED",
        TopView::Admitted => "ADMITTED",
        TopView::Shadowed => "SHADOWED",
    };
    let mut args = vec![view.to_string()];
    if let Some(count) = o.count {
        args.extend(["COUNT".to_string(), positive(count, "COUNT")?.to_string()]);
    }
    if o.reset {
        args.push("RESET".to_string());
    }
    Ok(Command::new("RATELIMIT.TOP", None, Vec::new(), args, |reply| {
        let rows = reply.as_array().ok_or_else(|| unexpected_reply("TOP", reply))?;
        rows.iter()
            .map(|row| {
                let text = row.field("key").and_then(|k| k.as_text()).map(str::to_string);
                let count = row.field("count").and_then(|c| c.as_int());
                let error = row.field("error").and_then(|e| e.as_int());
                match (text, count, error) {
                    (Some(key), Some(count), Some(error)) => Ok(TopEntry { key, count, error }),
                    _ => Err(unexpected_reply("TOP", reply)),
                }
            })
            .collect()
    }))
}
