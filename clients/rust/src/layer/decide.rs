//! What the rules decide for one request: the calls, in order, until one denies; what is done
//! after its response; the headers.

use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;

use super::body::Guard;
use super::rule::{Counting, Kind};
use super::Config;
use crate::results::{combined_headers, current, whole_seconds};
use crate::{AllOptions, Decision, Error, Limit, Reservation, Transport};

/// One matching rule's call for a request: the rule, its key, the request's cost.
pub(crate) struct Step {
    rule: usize,
    key: String,
    cost: u64,
}

/// The steps for a request: the rules that match it and have an identity for it.
pub(crate) fn steps<T>(config: &Config<T>, parts: &Parts) -> Vec<Step> {
    let mut steps = Vec::new();
    for (index, rule) in config.rules.iter().enumerate() {
        if !rule.matches(parts) {
            continue;
        }
        let key = rule.key.as_ref().unwrap_or(&config.key);
        if let Some(identity) = key.extract(parts) {
            let key = format!("{}{{{}:{identity}}}", config.prefix, rule.name);
            steps.push(Step { rule: index, key, cost: rule.cost_of(parts) });
        }
    }
    steps
}

/// What the rules decided, for the handler to see in the request's extensions.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Each limit's decision, named as in the headers.
    pub decisions: Vec<(String, Decision)>,
    /// A limit denied the request, and shadow mode let it through.
    pub shadow_denied: bool,
}

/// Done once the response is known.
pub(crate) enum After {
    /// Counted if the response's status says so.
    Count { rule: usize, key: String, cost: u64 },
    /// Settled with what the response says was used.
    Settle { rule: usize, reservation: Reservation },
}

/// A request let through.
pub(crate) struct Admitted {
    pub(crate) verdict: Verdict,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) after: Vec<After>,
    pub(crate) guards: Vec<Guard>,
}

/// The rules' answer.
pub(crate) enum Decided {
    Admit(Admitted),
    Refuse(Refusal),
}

/// A request not let through.
pub(crate) enum Refusal {
    /// Denied: how long until it would be admitted, and the headers.
    Deny { retry_after: Option<Duration>, headers: Vec<(&'static str, String)> },
    /// The server out of reach, and the layer fails closed.
    Unavailable,
    /// Another error (a key of another type, a refused argument): a 500.
    Failed(Error),
}

/// One step's answer: a decision (or several, HITALL's), whether it denied, what is left for after.
struct Answer {
    named: Vec<(String, Decision)>,
    denied: Option<Option<Duration>>,
    after: Option<After>,
    guard: Option<Guard>,
}

async fn answer<T: Transport>(config: &Config<T>, step: Step) -> Result<Answer, Error> {
    let rule = &config.rules[step.rule];
    let rl = &config.limiter;
    let name = rule.name.clone();
    let single = |d: Decision, after: Option<After>| Answer {
        denied: (!d.allowed).then_some(d.retry_after),
        named: vec![(name.clone(), d)],
        after: after.filter(|_| d.allowed),
        guard: None,
    };
    let reserved = |r: Reservation| {
        let d = r.decision;
        single(d, Some(After::Settle { rule: step.rule, reservation: r }))
    };
    let counted_after = || Some(After::Count { rule: step.rule, key: step.key.clone(), cost: step.cost });
    Ok(match (&rule.kind, &rule.counting) {
        (Kind::Fixed(f), Counting::OnRequest) => {
            single(rl.hit(&step.key, &f.clone().with_cost(step.cost)).await?, None)
        }
        (Kind::Fixed(f), Counting::Responses(_)) => {
            single(rl.peek(&step.key, f.limit(), step.cost).await?, counted_after())
        }
        (Kind::Fixed(f), Counting::Settled(_)) => {
            reserved(rl.reserve_hit(&step.key, &f.clone().with_cost(step.cost)).await?)
        }
        (Kind::Sliding(s), Counting::OnRequest) => single(rl.slide(&step.key, &s.with_cost(step.cost)).await?, None),
        (Kind::Sliding(s), Counting::Responses(_)) => {
            single(rl.slide_peek(&step.key, &s.with_cost(step.cost)).await?, counted_after())
        }
        (Kind::Sliding(s), Counting::Settled(_)) => {
            reserved(rl.reserve_slide(&step.key, &s.with_cost(step.cost)).await?)
        }
        (Kind::Gcra(r), Counting::Settled(_)) => reserved(rl.reserve_gcra(&step.key, &r.with_tokens(step.cost)).await?),
        (Kind::Gcra(r), _) => single(rl.gcra(&step.key, &r.with_tokens(step.cost)).await?, None),
        (Kind::AllOf(limits), _) => {
            let keyed: Vec<Limit> = limits
                .iter()
                .enumerate()
                .map(|(i, f)| Limit::new(format!("{}:{i}", step.key), f.limit(), f.window()))
                .collect();
            let mut options = AllOptions::new().with_cost(step.cost);
            if limits.iter().any(|f| f.align) {
                options = options.aligned();
            }
            if let Some(tz) = limits.iter().find_map(|f| f.tz.clone()) {
                options = options.in_zone(tz);
            }
            let all = rl.hit_all(&keyed, &options).await?;
            Answer {
                denied: (!all.allowed).then(|| all.retry_after()),
                named: all.decisions.iter().enumerate().map(|(i, d)| (format!("{name}-{i}"), *d)).collect(),
                after: None,
                guard: None,
            }
        }
        (Kind::InFlight { limit, lease }, _) => match rl.hold(&step.key, *limit, *lease).await {
            Ok(permit) => Answer { named: Vec::new(), denied: None, after: None, guard: Some(Box::new(permit)) },
            Err(Error::PermitUnavailable { wait, .. }) => {
                Answer { named: Vec::new(), denied: Some(Some(wait)), after: None, guard: None }
            }
            Err(e) => return Err(e),
        },
    })
}

/// The rules' decision for a request's steps, in order until one denies.
pub(crate) async fn decide<T: Transport>(config: Arc<Config<T>>, steps: Vec<Step>) -> Decided {
    let mut admitted =
        Admitted { verdict: Verdict::default(), headers: Vec::new(), after: Vec::new(), guards: Vec::new() };
    let mut denied = None;
    for step in steps {
        let answer = match answer(&config, step).await {
            Ok(answer) => answer,
            Err(e) if e.is_unreachable() && config.fail_open => return Decided::Admit(admitted),
            Err(e) if e.is_unreachable() => return Decided::Refuse(Refusal::Unavailable),
            Err(e) => return Decided::Refuse(Refusal::Failed(e)),
        };
        admitted.verdict.decisions.extend(answer.named);
        admitted.after.extend(answer.after);
        admitted.guards.extend(answer.guard);
        if answer.denied.is_some() {
            denied = answer.denied;
            break;
        }
    }
    let named: Vec<(&str, Decision)> = admitted.verdict.decisions.iter().map(|(n, d)| (n.as_str(), *d)).collect();
    let mut headers = combined_headers(&named, denied.flatten());
    if config.x_headers {
        if let Some((_, d)) = current(&named) {
            headers.push(("X-RateLimit-Limit", d.limit.to_string()));
            headers.push(("X-RateLimit-Remaining", d.remaining.to_string()));
            headers.push((
                "X-RateLimit-Reset",
                whole_seconds(d.reset_after.min(Duration::from_secs(1 << 31))).to_string(),
            ));
        }
    }
    match denied {
        Some(retry_after) if !config.shadow => {
            if named.is_empty() {
                // A permit's denial has no window to name: Retry-After alone.
                headers.extend(
                    retry_after.filter(|r| *r != crate::FOREVER).map(|r| ("Retry-After", whole_seconds(r).to_string())),
                );
            }
            Decided::Refuse(Refusal::Deny { retry_after, headers })
        }
        Some(_) => {
            headers.retain(|(name, _)| *name != "Retry-After");
            admitted.verdict.shadow_denied = true;
            admitted.headers = headers;
            Decided::Admit(admitted)
        }
        None => {
            admitted.headers = headers;
            Decided::Admit(admitted)
        }
    }
}

/// What is done once the response is known, on the runtime (the response does not wait for it).
pub(crate) fn after_response<T: Transport>(
    config: &Arc<Config<T>>,
    after: Vec<After>,
    response: &http::response::Parts,
) {
    let mut work = Vec::new();
    for step in after {
        let rule = &config.rules[match &step {
            After::Count { rule, .. } | After::Settle { rule, .. } => *rule,
        }];
        match (step, &rule.counting) {
            (After::Count { rule: index, key, cost }, Counting::Responses(counts)) if counts(response.status) => {
                work.push((index, key, cost, None));
            }
            (After::Settle { rule: index, reservation }, Counting::Settled(used)) => {
                if let Some(used) = used(response) {
                    work.push((index, String::new(), used, Some(reservation)));
                }
            }
            _ => {}
        }
    }
    if work.is_empty() {
        return;
    }
    let config = Arc::clone(config);
    tokio::spawn(async move {
        for (index, key, amount, reservation) in work {
            let rl = &config.limiter;
            // Out of reach, a count is lost, as a request is admitted when failing open.
            let _ = match (reservation, &config.rules[index].kind) {
                (Some(r), _) => rl.settle(&r, amount).await.map(drop),
                (None, Kind::Fixed(f)) => rl.hit(&key, &f.clone().with_cost(amount)).await.map(drop),
                (None, Kind::Sliding(s)) => rl.slide(&key, &s.with_cost(amount)).await.map(drop),
                _ => Ok(()),
            };
        }
    });
}
