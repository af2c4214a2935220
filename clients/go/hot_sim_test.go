//go:build !race

// The simulation is one goroutine: the race detector would only slow it down (make go-test
// runs it without).

package ratelimit

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// A deterministic simulation of a fleet's hot limit: the decisions of HotLimit (hotState's step
// and granted, as Take runs them) for each of 1,000 processes, with their clocks and transport
// injected, against a model of the server's HIT PARTIAL RESERVE on one key (a window started by
// its first grant, expiring at the first millisecond it counts, reset_ms as the module answers
// it). Each scenario checks every window: admissions at most the limit, and each admission
// inside the window that granted it; in steady windows with demand >= 1.2x the limit, at least
// 99% of the limit admitted; with demand below 0.9x, at least 99.9% of requests admitted.

const (
	simClients = 1000
	simLimit   = 100_000
	simWindow  = int64(time.Second)
	simWindows = 4
)

type simScenario struct {
	name string
	// demand per window, in limits; rtt the most a round trip takes (uniform from 0)
	demand float64
	rtt    time.Duration
	// skew: each process's clock runs at 1 + a rate drawn within ±skew
	skew float64
	// kill: a tenth of the processes die at this instant (0: none); pause: the server stops
	// answering for 100 ms from this instant (0: never); promote: the primary fails then and its
	// replica, 1 ms behind, takes over (0: never). Each grant is answered once the replica has
	// it (WAIT 1): the grants the failure loses were never answered, their requests fail.
	kill, pause, promote int64
}

// simReplicaLag is how far behind its primary the replica is.
const simReplicaLag = int64(time.Millisecond)

// simGrant is a grant made at `at`, for the promotion to take back if the replica lacked it.
type simGrant struct {
	at     int64
	window int
	amount int64
	lost   bool
}

type simEventKind int

const (
	simDemand simEventKind = iota
	simRetry
	simAtServer
	simAnswer
)

type simEvent struct {
	at     int64
	kind   simEventKind
	client int
	seq    int64
	// a request: its tokens wanted and local send time; an answer: the reservation
	want  int64
	sent  time.Duration
	grant Reservation
	made  *simGrant
	d     *simWaiting
}

type simQueue []*simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type simWaiting struct {
	arrived int64
	tries   int
	waited  bool
}

type simClient struct {
	s       *hotState
	rate    float64 // clock rate
	offset  time.Duration
	dead    bool
	waiting []*simWaiting
}

func (c *simClient) local(t int64) time.Duration {
	return c.offset + time.Duration(float64(t)*c.rate)
}

// trueAt is the true instant when c's clock reads local.
func (c *simClient) trueAt(local time.Duration) int64 {
	return int64(math.Ceil(float64(local-c.offset) / c.rate))
}

type simWindowStat struct {
	start, end          int64
	granted, admitted   int64
	requests, satisfied int64
}

type simServer struct {
	count   int64
	current int // index in windows, -1: none running
	windows []*simWindowStat
}

// reserve is the module's HIT key limit window MS COST want PARTIAL RESERVE at true time t.
func (sv *simServer) reserve(t, want int64) Reservation {
	if sv.current >= 0 && t >= sv.windows[sv.current].end {
		sv.current, sv.count = -1, 0
	}
	nowMS := t / int64(time.Millisecond) * int64(time.Millisecond)
	grant := min(want, max(0, simLimit-sv.count))
	if grant > 0 && sv.current < 0 {
		sv.windows = append(sv.windows, &simWindowStat{start: t, end: nowMS + simWindow})
		sv.current = len(sv.windows) - 1
	}
	var reset time.Duration
	if sv.current >= 0 {
		w := sv.windows[sv.current]
		w.granted += grant
		reset = time.Duration(w.end - nowMS)
	}
	sv.count += grant
	d := Decision{Allowed: grant > 0, Count: sv.count, Remaining: simLimit - sv.count, Limit: simLimit, ResetAfter: reset}
	return Reservation{Decision: d, Key: "hot", Token: fmt.Sprint(sv.current), Amount: grant}
}

// windowAt is the window running at true time t (nil: none).
func (sv *simServer) windowAt(t int64) *simWindowStat {
	i := sort.Search(len(sv.windows), func(i int) bool { return sv.windows[i].end > t })
	if i < len(sv.windows) && sv.windows[i].start <= t {
		return sv.windows[i]
	}
	return nil
}

type simResult struct {
	windows             []*simWindowStat
	admitted, outside   int64
	killedAt            int64
	sentCalls, demanded int64
	deniedNone          int64
	lost                int64 // tokens granted that the promotion took back
	deniedWithRoom      int64 // a Take denied while the server had not said none remain
}

func simulate(sc simScenario, seed uint64) simResult {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	sv := &simServer{current: -1}
	var q simQueue
	var seq int64
	push := func(e *simEvent) {
		seq++
		e.seq = seq
		heap.Push(&q, e)
	}
	end := simWindows * simWindow
	perClient := sc.demand * simLimit / float64(simClients) / float64(simWindow) // per ns
	clients := make([]*simClient, simClients)
	for i := range clients {
		rate := 1 + sc.skew*(2*rng.Float64()-1)
		offset := time.Duration(rng.Int64N(int64(time.Hour)))
		c := &simClient{rate: rate, offset: offset}
		c.s = newHotState(simLimit, 10*time.Millisecond, 2*time.Millisecond, c.local(0))
		clients[i] = c
		push(&simEvent{at: int64(rng.ExpFloat64() / perClient), kind: simDemand, client: i})
	}
	res := simResult{killedAt: sc.kill}
	serverFree := int64(0) // a paused server answers in order once it resumes
	var grants []*simGrant
	promoted := false
	leg := func() int64 { return rng.Int64N(int64(sc.rtt)/2 + 1) }
	// try runs one step of a Take of 1 for c at t: admit, deny, send, wait or sleep.
	try := func(i int, c *simClient, t int64, d *simWaiting) {
		step := c.s.step(c.local(t), 1, d.tries, d.waited)
		d.waited = step.wait
		if step.send > 0 {
			res.sentCalls++
			push(&simEvent{at: t + leg(), kind: simAtServer, client: i, want: step.send, sent: c.local(t)})
		}
		switch {
		case step.admitted:
			res.admitted++
			if w := sv.windowAt(t); w != nil {
				w.admitted++
				if d.arrived >= w.start {
					w.satisfied++
				}
			} else {
				res.outside++
			}
		case step.denied:
			if c.s.denied(c.local(t)) {
				res.deniedNone++
			} else {
				res.deniedWithRoom++
			}
		case step.wait:
			c.waiting = append(c.waiting, d)
		default:
			push(&simEvent{at: max(t+1, c.trueAt(step.sleepUntil)), kind: simRetry, client: i, d: d})
		}
	}
	for q.Len() > 0 {
		e := heap.Pop(&q).(*simEvent)
		t := e.at
		if t > end {
			break
		}
		if sc.kill > 0 && t >= sc.kill && res.killedAt > 0 {
			for i := 0; i < simClients/10; i++ {
				clients[rng.IntN(simClients)].dead = true
			}
			res.killedAt = -res.killedAt
		}
		c := clients[e.client]
		switch e.kind {
		case simDemand:
			if c.dead {
				continue
			}
			res.demanded++
			if w := sv.windowAt(t); w != nil {
				w.requests++
			}
			push(&simEvent{at: t + int64(rng.ExpFloat64()/perClient) + 1, kind: simDemand, client: e.client})
			try(e.client, c, t, &simWaiting{arrived: t})
		case simRetry:
			if !c.dead {
				try(e.client, c, t, e.d)
			}
		case simAtServer:
			if sc.pause > 0 && t >= sc.pause && t < sc.pause+int64(100*time.Millisecond) {
				t = sc.pause + int64(100*time.Millisecond)
			}
			t = max(t, serverFree)
			serverFree = t
			if sc.promote > 0 && t >= sc.promote && !promoted {
				// The replica has what the primary granted up to a lag before the failure.
				for _, g := range grants {
					if g.at > sc.promote-simReplicaLag && !g.lost {
						g.lost = true
						if g.window == sv.current {
							sv.count -= g.amount
							sv.windows[g.window].granted -= g.amount
						}
					}
				}
				promoted = true
			}
			r := sv.reserve(t, e.want)
			g := &simGrant{at: t, window: sv.current, amount: r.Amount}
			grants = append(grants, g)
			answer := t + leg()
			if sc.promote > 0 {
				answer += simReplicaLag // WAIT 1
			}
			push(&simEvent{at: answer, kind: simAnswer, client: e.client, sent: e.sent, grant: r, made: g})
		case simAnswer:
			if c.dead {
				continue
			}
			if sc.promote > 0 && e.made.at <= sc.promote && e.made.at > sc.promote-simReplicaLag {
				// The primary failed before the replica had it (and so before answering it, which
				// waits for the replica): no answer, the connection broke.
				res.lost += e.made.amount
				c.s.failed()
			} else {
				c.s.granted(e.sent, c.local(t), e.grant)
			}
			waiting := c.waiting
			c.waiting = nil
			for _, d := range waiting {
				d.tries++
				try(e.client, c, t, d)
			}
		}
	}
	res.windows = sv.windows
	return res
}

func TestHotLimitSimulation(t *testing.T) {
	scenarios := []simScenario{
		{name: "half the limit", demand: 0.5, rtt: 2 * time.Millisecond},
		{name: "0.85x, slow round trips, skewed clocks", demand: 0.85, rtt: 5 * time.Millisecond, skew: 200e-6},
		{name: "1.2x", demand: 1.2, rtt: 2 * time.Millisecond, skew: 100e-6},
		{name: "3x, slow round trips", demand: 3, rtt: 5 * time.Millisecond, skew: 200e-6},
		{name: "2x, a tenth killed mid-window", demand: 2, rtt: 2 * time.Millisecond, kill: simWindow * 3 / 2},
		{name: "0.8x, the server paused 100 ms", demand: 0.8, rtt: 2 * time.Millisecond, pause: simWindow * 5 / 2},
		{name: "1.5x, the server paused 100 ms", demand: 1.5, rtt: 2 * time.Millisecond, pause: simWindow * 5 / 2},
		{name: "2x, a replica promoted (grants answered once replicated)", demand: 2, rtt: 2 * time.Millisecond, promote: simWindow*2 + simWindow/5},
	}
	for i, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			r := simulate(sc, uint64(i+1))
			if r.outside > 0 {
				t.Errorf("%d admissions outside any window", r.outside)
			}
			var worstOver, worstUnder int64 = math.MinInt64, 0
			checked := 0
			for n, w := range r.windows {
				worstOver = max(worstOver, w.admitted-simLimit)
				if w.admitted > simLimit {
					t.Errorf("window %d: %d admitted, over the limit %d", n, w.admitted, simLimit)
				}
				disturbed := sc.kill > 0 && w.start <= sc.kill && sc.kill < w.end ||
					sc.pause > 0 && w.start <= sc.pause+int64(100*time.Millisecond) && sc.pause < w.end ||
					sc.promote > 0 && w.start <= sc.promote && sc.promote < w.end
				steady := n > 0 && w.end <= simWindows*simWindow && !disturbed
				if steady && sc.demand >= 1.2 {
					checked++
					worstUnder = max(worstUnder, simLimit-w.admitted)
					if float64(w.admitted) < 0.99*simLimit {
						t.Errorf("window %d: %d admitted of %d, demand %d", n, w.admitted, simLimit, w.requests)
					}
				}
			}
			// Requests still waiting when the run ends are neither admitted nor denied.
			share := float64(r.admitted) / float64(r.admitted+r.deniedNone+r.deniedWithRoom)
			t.Logf("%d windows, worst over %d, worst steady under %d; %d of %d requests admitted (%.4f; denied: %d none left); %d calls (1 per %.0f decisions); %d tokens lost in a failover",
				len(r.windows), worstOver, worstUnder, r.admitted, r.demanded, share, r.deniedNone, r.sentCalls, float64(r.admitted)/float64(r.sentCalls), r.lost)
			if r.deniedWithRoom > 0 {
				t.Errorf("%d takes denied while the window had room", r.deniedWithRoom)
			}
			if sc.promote > 0 && r.lost == 0 {
				t.Errorf("the promotion took back no grant: the scenario tests nothing")
			}
			if sc.demand >= 1.2 && checked == 0 {
				t.Errorf("no steady window to check")
			}
			if sc.demand < 0.9 && share < 0.999 {
				t.Errorf("demand %.2fx the limit: %.4f of requests admitted, want 0.999", sc.demand, share)
			}
		})
	}
}
