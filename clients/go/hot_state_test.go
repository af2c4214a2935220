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
