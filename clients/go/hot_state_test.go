package ratelimit

import (
	"testing"
	"time"
)

// A take just after the start asks for what it needs, not for a flood: one token in a
// microsecond is no rate (the load test's first run found a process asking for 11,000 of 4,000).
func TestHotStateColdStartAsksForItsNeed(t *testing.T) {
	s := newHotState(4000, 10*time.Millisecond, 3*time.Millisecond, 0)
	step := s.step(time.Microsecond, 1, 0, false)
	if step.send != 1 || !step.wait {
		t.Fatalf("the first take sends %+v, want a request for 1", step)
	}
	// A demand measured over a horizon, in a window not seen yet: no more than an eighth of the limit.
	s = newHotState(4000, 10*time.Millisecond, 3*time.Millisecond, 0)
	s.taken = 1_000_000
	if want, _ := s.ask(20*time.Millisecond, 1); want != 500 {
		t.Fatalf("asks for %d, want an eighth of the limit (500)", want)
	}
}

// The clocks' share of the guard follows the time the window had left, not the window's length:
// a calendar month's grant near its end is still usable (a thousandth of a year would be 8.8 h).
func TestHotStateGuardFollowsTheTimeLeft(t *testing.T) {
	s := newHotState(1000, 10*time.Millisecond, 2*time.Millisecond, 0)
	s.asking = true
	s.granted(0, time.Millisecond, Reservation{Decision: Decision{Remaining: 900, ResetAfter: time.Hour}, Amount: 100})
	if want := time.Hour - 2*time.Millisecond - time.Hour/1000; len(s.blocks) != 1 || s.blocks[0].deadline != want {
		t.Fatalf("blocks %+v, want one with deadline %v", s.blocks, want)
	}
	if !s.take(time.Hour-6*time.Second, 1) || s.take(time.Hour-time.Second, 1) {
		t.Fatalf("a block usable until its deadline, and not after")
	}
}

// A Take whose tokens another Take spends first, answer after answer, keeps waiting while the
// window has room (the Java load test on a busy machine saw 2 of 1,219 denied at half the limit):
// only the server's "none left" denies it.
func TestHotStateATakeOutrunByOthersWaitsWhileTheWindowHasRoom(t *testing.T) {
	s := newHotState(1000, 10*time.Millisecond, 3*time.Millisecond, 0)
	now := time.Millisecond
	if step := s.step(now, 1, 0, false); step.send != 1 || !step.wait {
		t.Fatalf("the first take sends %+v, want a request for 1", step)
	}
	for tries := 1; tries <= 10; tries++ {
		s.granted(now, now, Reservation{Decision: Decision{Remaining: 500, ResetAfter: time.Second}, Amount: 1})
		if step := s.step(now, 1, 0, false); !step.admitted {
			t.Fatalf("another take is not admitted: %+v", step)
		}
		if step := s.step(now, 1, tries, true); step.admitted || step.denied || !step.wait {
			t.Fatalf("after %d answers spent by others, the take steps %+v, want it waiting", tries, step)
		}
	}
	s.granted(now, now, Reservation{Decision: Decision{Remaining: 500, ResetAfter: time.Second}, Amount: 1})
	if step := s.step(now, 1, 11, true); !step.admitted {
		t.Fatalf("the take is not admitted by an answer of its own: %+v", step)
	}
	s.granted(now, now, Reservation{Decision: Decision{Remaining: 0, ResetAfter: time.Second}, Amount: 0})
	if step := s.step(now, 1, 0, false); !step.denied {
		t.Fatalf("a take after the server said none remain steps %+v, want it denied", step)
	}
}
