package ratelimit

import (
	"math"
	"time"
)

// hotState is what a HotLimit decides, with no I/O and no clock of its own: every instant is a
// Duration on the process's monotonic clock, given by the caller. The blocks of granted tokens
// held, the local demand, and the deny until the window resets. HotLimit runs it under its lock;
// the simulation in hot_sim_test.go runs it against a model of the server.
type hotState struct {
	// limit is the key's; horizon is how much of the local demand a block covers; guard, and a
	// thousandth of the time the window had left (for the clocks' rates), are taken off each
	// block's deadline.
	limit          int64
	horizon, guard time.Duration
	// blocks are the grants not yet spent, in the order they came (their deadlines too, but for
	// a grant of a new window that came first: each is checked).
	blocks []hotBlock
	// asking is set while a request is in flight (one at a time); waiting is the tokens the
	// Takes waiting for its answer want.
	asking  bool
	waiting int64
	// deniedUntil: the server said none remain; no request before then.
	deniedUntil time.Duration
	// pausedUntil: a grant came too late to be used (its window was ending); the next request
	// waits for the next window.
	pausedUntil time.Duration
	// The demand: tokens asked for since `since` (admitted or not), and the rate measured at the
	// last request (tokens per second).
	taken int64
	since time.Duration
	rate  float64
	// remaining is what the server had left after the last grant (-1: not known yet); windowEnd
	// is that grant's deadline.
	remaining int64
	windowEnd time.Duration
}

// hotBlock is one grant: tokens left, usable before deadline, and the reservation that settles
// what was not used.
type hotBlock struct {
	left     int64
	deadline time.Duration
	grant    Reservation
}

func newHotState(limit int64, horizon, guard time.Duration, now time.Duration) *hotState {
	return &hotState{limit: limit, horizon: horizon, guard: guard, since: now, remaining: -1}
}

// held is the tokens usable at now: the blocks' left whose deadline has not come.
func (s *hotState) held(now time.Duration) int64 {
	var n int64
	for _, b := range s.blocks {
		if now < b.deadline {
			n += b.left
		}
	}
	return n
}

// take spends n tokens at now if the blocks hold them (the first to expire first): no round trip.
func (s *hotState) take(now time.Duration, n int64) bool {
	s.drop(now)
	if s.held(now) < n {
		return false
	}
	for i := range s.blocks {
		spent := min(n, s.blocks[i].left)
		s.blocks[i].left -= spent
		n -= spent
	}
	s.drop(now)
	return true
}

// drop forgets the blocks spent or past their deadline (an expired block's tokens are lost for
// its window: it has ended, or is about to).
func (s *hotState) drop(now time.Duration) {
	kept := s.blocks[:0]
	for _, b := range s.blocks {
		if b.left > 0 && now < b.deadline {
			kept = append(kept, b)
		}
	}
	clear(s.blocks[len(kept):])
	s.blocks = kept
}

// denied reports whether the server said none remain in the window running at now.
func (s *hotState) denied(now time.Duration) bool { return now < s.deniedUntil }

// ask says whether to send a request at now, and for how many tokens, when `need` more are
// wanted (0: only refilling ahead). A request goes when none is in flight, the server has not
// said none remain, and what is held covers less than half a horizon of demand (or less than
// `need`). It asks for a horizon of demand (measured over a horizon at least: none before),
// at least `need`, no more than the demand can spend before the window's end, nor than an
// eighth of what the server had left (of the limit, in a window not seen yet), so that no
// process hoards what the others need.
func (s *hotState) ask(now time.Duration, need int64) (int64, bool) {
	if s.asking || s.denied(now) || now < s.pausedUntil {
		return 0, false
	}
	held := s.held(now)
	// The demand, measured over a horizon at least (a first take just after the start would
	// make one token look like a flood).
	if elapsed := now - s.since; elapsed >= s.horizon {
		s.rate = float64(s.taken) / elapsed.Seconds()
		s.taken, s.since = 0, now
	}
	want := int64(math.Ceil(s.rate * s.horizon.Seconds()))
	if held >= need && (held > want/2 || want == 0) {
		return 0, false
	}
	left := s.limit
	if now < s.windowEnd {
		// In the window of the last grant: no more than the demand spends before it ends, and
		// what the server had left then.
		want = min(want, int64(math.Ceil(s.rate*(s.windowEnd-now).Seconds())))
		left = s.remaining
	}
	want = min(want, max(1, left/8))
	want = max(want, need-held, 1)
	s.asking = true
	return want, true
}

// granted takes the answer to the request sent at `sent`: a block usable until the window's end
// as the server saw it, less the guard, counted from the send (the server read its clock after
// it: the block ends no later than the window, whatever the offset between the hosts' clocks). A
// grant of 0, or one that left none, makes the window denied until it resets.
func (s *hotState) granted(sent, received time.Duration, r Reservation) {
	s.asking = false
	// The window's end counted from the receipt (the server read its clock before it): not
	// before the reset.
	guard := s.guard + r.ResetAfter/1000
	reset := received + r.ResetAfter + guard
	deadline := sent + r.ResetAfter - guard
	switch {
	case r.Amount > 0 && received < deadline:
		s.blocks = append(s.blocks, hotBlock{left: r.Amount, deadline: deadline, grant: r})
		s.remaining, s.windowEnd = r.Remaining, deadline
	case r.Amount > 0:
		// Granted in a window that ends before they could be used: lost for it, and the next
		// request waits for the next window.
		s.pausedUntil = reset
		return
	}
	if r.Amount == 0 || r.Remaining == 0 {
		s.deniedUntil = reset
	}
}

// hotStep is what to do for a Take: admit or deny it, and send a request (for `send` tokens),
// or wait for the one in flight, or until `sleepUntil`, then step again.
type hotStep struct {
	admitted, denied bool
	send             int64
	wait             bool
	sleepUntil       time.Duration
}

// step is a Take of n at now, its `tries`th step: a step after waiting for an answer is a try
// (`waited`: the Take was counted among those waiting, and is not any more). The first step
// counts n in the demand, admitted or not. A Take is denied only when the server said the window
// has none left: one whose tokens others spent first waits for the next answer, however often
// (each grant spends the window, so the server says so within the limit's count of answers).
func (s *hotState) step(now time.Duration, n int64, tries int, waited bool) hotStep {
	if waited {
		s.waiting -= n
	}
	if tries == 0 {
		s.taken += n
	}
	if s.take(now, n) {
		want, send := s.ask(now, s.waiting)
		return hotStep{admitted: true, send: want * b2i(send)}
	}
	if s.denied(now) {
		return hotStep{denied: true}
	}
	want, send := s.ask(now, n+s.waiting)
	if send || s.asking {
		s.waiting += n
		return hotStep{send: want * b2i(send), wait: true}
	}
	return hotStep{sleepUntil: s.pausedUntil}
}

// gaveUp takes a Take that stopped waiting for the answer (its context ended).
func (s *hotState) gaveUp(n int64) { s.waiting -= n }

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// failed takes a request that got no answer.
func (s *hotState) failed() { s.asking = false }

// unused is what to settle at the end: each live block's reservation and what of it was used.
func (s *hotState) unused(now time.Duration) []hotBlock {
	s.drop(now)
	live := s.blocks
	s.blocks = nil
	return live
}
