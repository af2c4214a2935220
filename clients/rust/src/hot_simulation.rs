//! A deterministic simulation of a fleet's hot limit: the decisions of HotLimit (HotState's step
//! and granted, as take runs them) for each of 1,000 processes, with their clocks and transport
//! injected, against a model of the server's HIT PARTIAL RESERVE on one key (a window started by
//! its first grant, expiring at the first millisecond it counts, reset_ms as the module answers
//! it). The eight scenarios the Python, Node, Go and Java hot limits run. Each checks every
//! window: admissions at most the limit, and each inside the window that granted it; in steady
//! windows with demand >= 1.2x the limit, at least 99% of the limit admitted; with demand below
//! 0.9x, at least 99.9% of requests admitted.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::time::Duration;

use crate::hot_state::HotState;
use crate::{Decision, Reservation};

const CLIENTS: usize = 1000;
const LIMIT: i64 = 100_000;
const WINDOW: i64 = 1_000_000_000;
const WINDOWS: i64 = 4;
const MS: i64 = 1_000_000;
/// How far behind its primary the replica is.
const REPLICA_LAG: i64 = MS;

struct Scenario {
    name: &'static str,
    demand: f64,
    rtt: i64,
    skew: f64,
    kill: i64,
    pause: i64,
    promote: i64,
}

/// A small PCG (the tests' own, deterministic by seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let x = self.0;
        let rot = (x >> 59) as u32;
        ((((x >> 18) ^ x) >> 27) as u32).rotate_right(rot) as u64 | ((x >> 32) << 32)
    }
    fn float(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: i64) -> i64 {
        (self.next() % n.max(1) as u64) as i64
    }
    fn exp(&mut self) -> f64 {
        -(1.0 - self.float()).ln()
    }
}

struct Grant {
    at: i64,
    window: Option<usize>,
    amount: i64,
    lost: bool,
}

#[derive(Default)]
struct Waiting {
    tries: u32,
    waited: bool,
}

enum Kind {
    Demand,
    Retry(Rc<RefCell<Waiting>>),
    AtServer { want: i64, sent: Duration },
    Answer { sent: Duration, grant: Reservation, made: Rc<RefCell<Grant>> },
}

struct Event {
    at: i64,
    seq: u64,
    client: usize,
    kind: Kind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Event) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    fn cmp(&self, other: &Event) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

struct Client {
    s: HotState,
    rate: f64,
    offset: i64,
    dead: bool,
    waiting: Vec<Rc<RefCell<Waiting>>>,
}

impl Client {
    fn local(&self, t: i64) -> Duration {
        Duration::from_nanos((self.offset + (t as f64 * self.rate) as i64) as u64)
    }
    fn true_at(&self, local: Duration) -> i64 {
        ((local.as_nanos() as i64 - self.offset) as f64 / self.rate).ceil() as i64
    }
}

#[derive(Default)]
struct WindowStat {
    start: i64,
    end: i64,
    admitted: i64,
    requests: i64,
}

#[derive(Default)]
struct Server {
    count: i64,
    current: Option<usize>,
    windows: Vec<WindowStat>,
}

impl Server {
    /// The module's HIT key limit window MS COST want PARTIAL RESERVE at true time t.
    fn reserve(&mut self, t: i64, want: i64) -> Reservation {
        if self.current.is_some_and(|c| t >= self.windows[c].end) {
            self.current = None;
            self.count = 0;
        }
        let now_ms = t / MS * MS;
        let grant = want.min((LIMIT - self.count).max(0));
        if grant > 0 && self.current.is_none() {
            self.windows.push(WindowStat { start: t, end: now_ms + WINDOW, ..WindowStat::default() });
            self.current = Some(self.windows.len() - 1);
        }
        let reset = self.current.map_or(0, |c| self.windows[c].end - now_ms);
        self.count += grant;
        let decision = Decision {
            allowed: grant > 0,
            count: self.count,
            remaining: LIMIT - self.count,
            limit: LIMIT,
            reset_after: Duration::from_nanos(reset as u64),
            retry_after: None,
            window: None,
        };
        Reservation { decision, key: "hot".into(), token: Some(format!("{:?}", self.current)), amount: grant }
    }

    fn window_at(&mut self, t: i64) -> Option<&mut WindowStat> {
        let i = self.windows.partition_point(|w| w.end <= t);
        self.windows.get_mut(i).filter(|w| w.start <= t)
    }
}

#[derive(Default)]
struct Outcome {
    windows: Vec<WindowStat>,
    admitted: i64,
    outside: i64,
    sent_calls: i64,
    demanded: i64,
    denied_none: i64,
    denied_with_room: i64,
    lost: i64,
}

/// A run: the events in order, the fleet, the server model and what was seen.
struct Run<'a> {
    sc: &'a Scenario,
    queue: BinaryHeap<Reverse<Event>>,
    seq: u64,
    rng: Rng,
    server: Server,
    clients: Vec<Client>,
    out: Outcome,
}

impl Run<'_> {
    fn push(&mut self, at: i64, client: usize, kind: Kind) {
        self.seq += 1;
        self.queue.push(Reverse(Event { at, seq: self.seq, client, kind }));
    }

    /// A network leg: uniform within half the round trip.
    fn leg(&mut self) -> i64 {
        self.rng.below(self.sc.rtt / 2 + 1)
    }

    /// One step of a take of 1 for client `i` at `t`: admit, deny, send, wait or sleep.
    fn attempt(&mut self, i: usize, t: i64, d: Rc<RefCell<Waiting>>) {
        let local = self.clients[i].local(t);
        let (tries, waited) = (d.borrow().tries, d.borrow().waited);
        let step = self.clients[i].s.step(local, 1, tries, waited);
        d.borrow_mut().waited = step.wait;
        if step.send > 0 {
            self.out.sent_calls += 1;
            let at = t + self.leg();
            self.push(at, i, Kind::AtServer { want: step.send, sent: local });
        }
        if step.admitted {
            self.out.admitted += 1;
            match self.server.window_at(t) {
                Some(w) => w.admitted += 1,
                None => self.out.outside += 1,
            }
        } else if step.denied {
            if self.clients[i].s.denied(local) {
                self.out.denied_none += 1;
            } else {
                self.out.denied_with_room += 1;
            }
        } else if step.wait {
            self.clients[i].waiting.push(d);
        } else {
            let at = (t + 1).max(self.clients[i].true_at(step.sleep_until));
            self.push(at, i, Kind::Retry(d));
        }
    }
}

fn simulate(sc: &Scenario, seed: u64) -> Outcome {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
    let clients = (0..CLIENTS)
        .map(|_| {
            let rate = 1.0 + sc.skew * (2.0 * rng.float() - 1.0);
            let offset = rng.below(3_600_000_000_000);
            let start = Duration::from_nanos(offset as u64);
            let s = HotState::new(LIMIT, Duration::from_millis(10), Duration::from_millis(2), start);
            Client { s, rate, offset, dead: false, waiting: Vec::new() }
        })
        .collect();
    let mut run =
        Run { sc, queue: BinaryHeap::new(), seq: 0, rng, server: Server::default(), clients, out: Outcome::default() };
    let end = WINDOWS * WINDOW;
    let per_client = sc.demand * LIMIT as f64 / CLIENTS as f64 / WINDOW as f64;
    for i in 0..CLIENTS {
        let at = (run.rng.exp() / per_client) as i64;
        run.push(at, i, Kind::Demand);
    }
    let mut killed = false;
    let mut server_free = 0i64;
    let mut grants: Vec<Rc<RefCell<Grant>>> = Vec::new();
    let mut promoted = false;
    while let Some(Reverse(event)) = run.queue.pop() {
        let mut t = event.at;
        if t > end {
            break;
        }
        if sc.kill > 0 && t >= sc.kill && !killed {
            for _ in 0..CLIENTS / 10 {
                let i = run.rng.below(CLIENTS as i64) as usize;
                run.clients[i].dead = true;
            }
            killed = true;
        }
        let i = event.client;
        match event.kind {
            Kind::Demand => {
                if run.clients[i].dead {
                    continue;
                }
                run.out.demanded += 1;
                if let Some(w) = run.server.window_at(t) {
                    w.requests += 1;
                }
                let next = t + (run.rng.exp() / per_client) as i64 + 1;
                run.push(next, i, Kind::Demand);
                run.attempt(i, t, Rc::new(RefCell::new(Waiting::default())));
            }
            Kind::Retry(d) => {
                if !run.clients[i].dead {
                    run.attempt(i, t, d);
                }
            }
            Kind::AtServer { want, sent } => {
                if sc.pause > 0 && t >= sc.pause && t < sc.pause + 100 * MS {
                    t = sc.pause + 100 * MS;
                }
                t = t.max(server_free);
                server_free = t;
                if sc.promote > 0 && t >= sc.promote && !promoted {
                    // The replica has what the primary granted up to a lag before the failure.
                    for g in &grants {
                        let mut g = g.borrow_mut();
                        if g.at > sc.promote - REPLICA_LAG && !g.lost {
                            g.lost = true;
                            if g.window.is_some() && g.window == run.server.current {
                                run.server.count -= g.amount;
                            }
                        }
                    }
                    promoted = true;
                }
                let r = run.server.reserve(t, want);
                let made =
                    Rc::new(RefCell::new(Grant { at: t, window: run.server.current, amount: r.amount, lost: false }));
                grants.push(Rc::clone(&made));
                let mut answer = t + run.leg();
                if sc.promote > 0 {
                    answer += REPLICA_LAG; // WAIT 1
                }
                run.push(answer, i, Kind::Answer { sent, grant: r, made });
            }
            Kind::Answer { sent, grant, made } => {
                if run.clients[i].dead {
                    continue;
                }
                let made_at = made.borrow().at;
                if sc.promote > 0 && made_at <= sc.promote && made_at > sc.promote - REPLICA_LAG {
                    // The primary failed before the replica had it: no answer.
                    run.out.lost += made.borrow().amount;
                    run.clients[i].s.failed();
                } else {
                    let local = run.clients[i].local(t);
                    run.clients[i].s.granted(sent, local, grant);
                }
                for d in std::mem::take(&mut run.clients[i].waiting) {
                    d.borrow_mut().tries += 1;
                    run.attempt(i, t, d);
                }
            }
        }
    }
    run.out.windows = run.server.windows;
    run.out
}

#[test]
fn hot_limit_simulation() {
    let s = WINDOW;
    let scenarios = [
        Scenario { name: "half the limit", demand: 0.5, rtt: 2 * MS, skew: 0.0, kill: 0, pause: 0, promote: 0 },
        Scenario {
            name: "0.85x, slow round trips, skewed clocks",
            demand: 0.85,
            rtt: 5 * MS,
            skew: 200e-6,
            kill: 0,
            pause: 0,
            promote: 0,
        },
        Scenario { name: "1.2x", demand: 1.2, rtt: 2 * MS, skew: 100e-6, kill: 0, pause: 0, promote: 0 },
        Scenario {
            name: "3x, slow round trips",
            demand: 3.0,
            rtt: 5 * MS,
            skew: 200e-6,
            kill: 0,
            pause: 0,
            promote: 0,
        },
        Scenario {
            name: "2x, a tenth killed mid-window",
            demand: 2.0,
            rtt: 2 * MS,
            skew: 0.0,
            kill: s * 3 / 2,
            pause: 0,
            promote: 0,
        },
        Scenario {
            name: "0.8x, the server paused 100 ms",
            demand: 0.8,
            rtt: 2 * MS,
            skew: 0.0,
            kill: 0,
            pause: s * 5 / 2,
            promote: 0,
        },
        Scenario {
            name: "1.5x, the server paused 100 ms",
            demand: 1.5,
            rtt: 2 * MS,
            skew: 0.0,
            kill: 0,
            pause: s * 5 / 2,
            promote: 0,
        },
        Scenario {
            name: "2x, a replica promoted (grants answered once replicated)",
            demand: 2.0,
            rtt: 2 * MS,
            skew: 0.0,
            kill: 0,
            pause: 0,
            promote: s * 2 + s / 5,
        },
    ];
    let mut failures = Vec::new();
    for (n, sc) in scenarios.iter().enumerate() {
        let r = simulate(sc, n as u64 + 1);
        let mut fail = |what: String| failures.push(format!("{}: {what}", sc.name));
        if r.outside > 0 {
            fail(format!("{} admissions outside any window", r.outside));
        }
        let (mut worst_over, mut worst_under, mut checked) = (i64::MIN, 0, 0);
        for (k, w) in r.windows.iter().enumerate() {
            worst_over = worst_over.max(w.admitted - LIMIT);
            if w.admitted > LIMIT {
                fail(format!("window {k}: {} admitted, over the limit {LIMIT}", w.admitted));
            }
            let disturbed = sc.kill > 0 && w.start <= sc.kill && sc.kill < w.end
                || sc.pause > 0 && w.start <= sc.pause + 100 * MS && sc.pause < w.end
                || sc.promote > 0 && w.start <= sc.promote && sc.promote < w.end;
            let steady = k > 0 && w.end <= WINDOWS * WINDOW && !disturbed;
            if steady && sc.demand >= 1.2 {
                checked += 1;
                worst_under = worst_under.max(LIMIT - w.admitted);
                if (w.admitted as f64) < 0.99 * LIMIT as f64 {
                    fail(format!("window {k}: {} admitted of {LIMIT}, demand {}", w.admitted, w.requests));
                }
            }
        }
        let share = r.admitted as f64 / (r.admitted + r.denied_none + r.denied_with_room) as f64;
        println!(
            "hot_sim {}: {} windows, worst over {worst_over}, worst steady under {worst_under}; {} of {} requests admitted ({share:.4}; denied: {} none left); {} calls (1 per {:.0} decisions); {} tokens lost in a failover",
            sc.name, r.windows.len(), r.admitted, r.demanded, r.denied_none, r.sent_calls, r.admitted as f64 / r.sent_calls as f64, r.lost
        );
        if r.denied_with_room > 0 {
            fail(format!("{} takes denied while the window had room", r.denied_with_room));
        }
        if sc.promote > 0 && r.lost == 0 {
            fail("the promotion took back no grant: the scenario tests nothing".into());
        }
        if sc.demand >= 1.2 && checked == 0 {
            fail("no steady window to check".into());
        }
        if sc.demand < 0.9 && share < 0.999 {
            fail(format!("demand {:.2}x the limit: {share:.4} of requests admitted, want 0.999", sc.demand));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
