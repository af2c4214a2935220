package ratelimit

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every refusal happens before anything is sent: an *ArgumentError that errors.Is finds as
// ErrInvalidArgument, worded as the server words it.
func TestArgumentsRefusedBeforeSending(t *testing.T) {
	day := []Limit{{Key: "a", Limit: 1, Calendar: Day}}
	second := []Limit{{Key: "a", Limit: 1, Window: time.Second}}
	refused := []struct {
		name    string
		err     error
		message string
	}{
		{"limit 0", Fixed{Limit: 0, Window: time.Second}.Validate(), "limit must be an integer >= 1"},
		{"no window", Fixed{Limit: 1}.Validate(), "window must be a whole number of milliseconds >= 1ms"},
		{"a part of a ms", Sliding{Limit: 1, Window: 1500 * time.Microsecond}.Validate(), "window must be a whole number of milliseconds >= 1ms"},
		{"window and calendar", Fixed{Limit: 1, Window: time.Second, Calendar: Day}.Validate(), "give a Window or a Calendar, not both"},
		{"an unknown calendar", Fixed{Limit: 1, Calendar: "fortnight"}.Validate(), `window must be a length or day, week, month or year, not "fortnight"`},
		{"TZ on a length", Fixed{Limit: 1, Window: time.Second, TZ: "UTC"}.Validate(), "TZ needs a calendar window (day, week, month or year)"},
		{"no limits", AllOptions{}.Validate(nil), "HITALL needs at least one limit"},
		{"SLIDE on a calendar", AllOptions{Sliding: true}.Validate(day), "SLIDE and a calendar window cannot be given together"},
		{"SLIDE and ALIGN", AllOptions{Sliding: true, Align: true}.Validate(second), "SLIDE and ALIGN cannot be given together"},
		{"HITALL's cost", AllOptions{Cost: -1}.Validate(second), "COST must be an integer >= 1"},
		{"TOKENS' keys", AllOptions{Tokens: 5, TokenKeys: 2}.Validate(second), "TOKENS' key count must be between 1 and numkeys"},
		{"TOKENS 0 with keys", AllOptions{TokenKeys: 1}.Validate(second), "TOKENS must be an integer >= 1"},
		{"a negative burst", Rate{MaxBurst: -1, PerPeriod: 1, Period: time.Second}.Validate(), "max_burst must be an integer >= 0"},
		{"no tokens a period", Rate{PerPeriod: 0, Period: time.Second}.Validate(), "tokens_per_period must be an integer >= 1"},
		{"no period", Rate{PerPeriod: 1}.Validate(), "period must be > 0"},
		{"PEEK's cost", builderError(peekCall("k", 1, -2)), "COST must be an integer >= 1"},
		{"PARTIAL giving back", builderError(gcraUpToCall("k", Rate{PerPeriod: 1, Period: time.Second, Tokens: -1})), "TOKENS must be an integer >= 1"},
		{"ALIGN reserved", builderError(reserveGCRACall("k", Rate{PerPeriod: 1, Period: time.Second, Tokens: 1, Align: true})), "ALIGN and RESERVE cannot be given together"},
		{"RESERVE of a give-back", builderError(reserveHitCall("k", Fixed{Limit: 1, Window: time.Second, Cost: -1})), "RESERVE needs COST >= 1"},
		{"RESERVE with no tokens", builderError(reserveAllCall(second, AllOptions{})), "RESERVE needs TOKENS >= 1"},
		{"settled below 0", builderError(settleCall(Reservation{Key: "k", Token: "h:1"}, -1)), "used must be an integer >= 0"},
		{"a denial settled", builderError(settleCall(Reservation{Key: "k"}, 1)), "a denied call has no reservation to settle"},
		{"an id too long", builderError(releaseCall("k", strings.Repeat("x", 257))), "ID must be 1 to 256 bytes"},
		{"an empty id", builderError(renewCall("k", "", time.Second)), "ID must be 1 to 256 bytes"},
		{"a lease of 0", builderError(acquireCall("k", 1, 0, "")), "lease must be a whole number of milliseconds >= 1ms"},
		{"TOP's view", builderError(topCall(TopOptions{View: "recent"})), `view must be "denied", "admitted" or "shadowed"`},
		{"TOP's count", builderError(topCall(TopOptions{Count: -1})), "COUNT must be an integer >= 1"},
	}
	for _, r := range refused {
		var argument *ArgumentError
		if !errors.Is(r.err, ErrInvalidArgument) || !errors.As(r.err, &argument) || argument.Message != r.message {
			t.Errorf("%s: %v, want %q", r.name, r.err, r.message)
		}
	}
}

// builderError is a builder's error.
func builderError[T any](_ T, err error) error { return err }

// What each call sends, to the module and to the library.
func TestArgumentsSent(t *testing.T) {
	sent := []struct {
		name           string
		module, fcall  []string
		build          func() (command[Decision], error)
		multiLimitCall func() (command[MultiDecision], error)
	}{
		{name: "a window in seconds, cost 1 left out",
			module: []string{"RATELIMIT.HIT", "k", "10", "60"},
			fcall:  []string{"FCALL", "ratelimit_hit", "1", "k", "10", "60"},
			build:  func() (command[Decision], error) { return hitCall("k", Fixed{Limit: 10, Window: time.Minute}) }},
		{name: "a window in ms, a give-back",
			module: []string{"RATELIMIT.HIT", "k", "10", "1500", "COST", "-3", "MS", "ALIGN"},
			build: func() (command[Decision], error) {
				return hitCall("k", Fixed{Limit: 10, Window: 1500 * time.Millisecond, Cost: -3, Align: true})
			}},
		{name: "a calendar window in a zone",
			module: []string{"RATELIMIT.HIT", "k", "5", "month", "TZ", "Europe/Paris"},
			build: func() (command[Decision], error) {
				return hitCall("k", Fixed{Limit: 5, Calendar: Month, TZ: "Europe/Paris"})
			}},
		{name: "a sliding window's peek",
			module: []string{"RATELIMIT.SLIDE", "k", "5", "2", "COST", "2", "PEEK"},
			build: func() (command[Decision], error) {
				return slidePeekCall("k", Sliding{Limit: 5, Window: 2 * time.Second, Cost: 2})
			}},
		{name: "a GCRA period to the nanosecond",
			module: []string{"RATELIMIT.GCRA", "k", "0", "3", "0.000000001", "TOKENS", "-2"},
			fcall:  []string{"FCALL", "ratelimit_gcra", "1", "k", "0", "3", "0.000000001", "TOKENS", "-2"},
			build: func() (command[Decision], error) {
				return gcraCall("k", Rate{PerPeriod: 3, Period: time.Nanosecond, Tokens: -2})
			}},
		{name: "a GCRA bucket refilled at its period's boundaries",
			module: []string{"RATELIMIT.GCRA", "k", "9", "10", "3600", "ALIGN"},
			fcall:  []string{"FCALL", "ratelimit_gcra", "1", "k", "9", "10", "3600", "ALIGN"},
			build: func() (command[Decision], error) {
				return gcraCall("k", Rate{MaxBurst: 9, PerPeriod: 10, Period: time.Hour, Align: true})
			}},
		{name: "HITALL's lengths in one unit, ms when one needs it",
			module: []string{"RATELIMIT.HITALL", "3", "{u}1", "{u}2", "{u}3", "1", "1000", "2", "1500", "3", "day", "MS",
				"TOKENS", "40", "1"},
			fcall: []string{"FCALL", "ratelimit_hitall", "3", "{u}1", "{u}2", "{u}3", "1", "1000", "2", "1500", "3", "day", "MS",
				"TOKENS", "40", "1"},
			multiLimitCall: func() (command[MultiDecision], error) {
				return hitAllCall([]Limit{{Key: "{u}1", Limit: 1, Window: time.Second}, {Key: "{u}2", Limit: 2, Window: 1500 * time.Millisecond},
					{Key: "{u}3", Limit: 3, Calendar: Day}}, AllOptions{Tokens: 40, TokenKeys: 1})
			}},
	}
	for _, s := range sent {
		var module, fcall []string
		var err error
		if s.build != nil {
			var c command[Decision]
			c, err = s.build()
			module, fcall = c.ModuleArgs(), c.LibraryArgs()
		} else {
			var c command[MultiDecision]
			c, err = s.multiLimitCall()
			module, fcall = c.ModuleArgs(), c.LibraryArgs()
		}
		if err != nil {
			t.Errorf("%s: %v", s.name, err)
			continue
		}
		if !reflect.DeepEqual(module, s.module) {
			t.Errorf("%s: sends %q to the module, want %q", s.name, module, s.module)
		}
		if s.fcall != nil && !reflect.DeepEqual(fcall, s.fcall) {
			t.Errorf("%s: sends %q to the library, want %q", s.name, fcall, s.fcall)
		}
	}
}

// built is a call its builder took (a refusal here is the test's mistake).
func built[T any](c command[T], err error) command[T] {
	if err != nil {
		panic(err)
	}
	return c
}

// Replies read as the server sends them, RESP2 and RESP3 alike, and a reply of another shape is
// an error, not a zero answer.
func TestRepliesRead(t *testing.T) {
	minute := time.Minute
	hit := built(hitCall("k", Fixed{Limit: 10, Window: minute, Cost: 3}))
	got, err := hit.Parse([]any{int64(0), int64(9), int64(1), int64(12_000)})
	want := Decision{Count: 9, Remaining: 1, Limit: 10, ResetAfter: 12 * time.Second, RetryAfter: 12 * time.Second, Window: minute}
	if err != nil || got != want {
		t.Errorf("a fixed window's denial: %+v, %v", got, err)
	}
	never := built(hitCall("k", Fixed{Limit: 2, Window: minute, Cost: 3}))
	if got, _ := never.Parse([]any{int64(0), int64(0), int64(2), int64(-1)}); got.RetryAfter != Forever || got.ResetAfter != Forever {
		t.Errorf("a cost above the limit never fits: %+v", got)
	}
	slide := built(slideCall("k", Sliding{Limit: 5, Window: minute}))
	got, err = slide.Parse([]any{int64(0), int64(5), int64(0), int64(700), int64(30_000)})
	want = Decision{Count: 5, Limit: 5, ResetAfter: 30 * time.Second, RetryAfter: 700 * time.Millisecond, Window: minute}
	if err != nil || got != want {
		t.Errorf("a sliding window's denial: %+v, %v", got, err)
	}
	bucket := built(gcraCall("k", Rate{MaxBurst: 4, PerPeriod: 1, Period: time.Second}))
	got, err = bucket.Parse([]any{int64(0), int64(5), int64(4), int64(-1), int64(1_000)})
	want = Decision{Allowed: true, Count: 1, Remaining: 4, Limit: 5, ResetAfter: time.Second, Window: time.Second}
	if err != nil || got != want {
		t.Errorf("GCRA (0 is admitted there): %+v, %v", got, err)
	}
	upTo := built(gcraUpToCall("k", Rate{PerPeriod: 1, Period: time.Second, Tokens: 5}))
	if g, err := upTo.Parse([]any{int64(0), int64(1), int64(0), int64(-1), int64(1_000), int64(1)}); err != nil || g.Granted != 1 || !g.Allowed {
		t.Errorf("PARTIAL's grant: %+v, %v", g, err)
	}
	reserve := built(reserveHitCall("k", Fixed{Limit: 10, Window: minute, Cost: 4}))
	r, err := reserve.Parse([]any{int64(1), int64(4), int64(6), int64(60_000), "h:10:60000:4:1:abc"})
	if err != nil || r.Token != "h:10:60000:4:1:abc" || r.Key != "k" || r.Amount != 4 || !r.Allowed {
		t.Errorf("a reservation: %+v, %v", r, err)
	}
	// The reservation is opaque: the reply says what it was of.
	settle := built(settleCall(Reservation{Key: "k", Token: "opaque"}, 1))
	s, err := settle.Parse([]any{int64(1), int64(1), int64(4), int64(0), int64(60_000), int64(-1), "sliding", int64(5), int64(60_000)})
	if err != nil || s.Applied != -1 || s.Limit != 5 || s.Window != minute {
		t.Errorf("a sliding window's settle: %+v, %v", s, err)
	}
	acquire := built(acquireCall("k", 2, time.Second, "id"))
	a, err := acquire.Parse([]any{int64(1), int64(1), int64(1), int64(1_000), "id"})
	if err != nil || a != (Acquisition{Acquired: true, InUse: 1, Remaining: 1, Wait: time.Second, ID: "id"}) {
		t.Errorf("a permit: %+v, %v", a, err)
	}
	top := built(topCall(TopOptions{}))
	resp2 := []any{[]any{"key", "a", "count", int64(3), "error", int64(0)}}
	resp3 := []any{map[string]any{"key": "a", "count": int64(3), "error": int64(0)}}
	for _, reply := range []any{resp2, resp3} {
		if e, err := top.Parse(reply); err != nil || len(e) != 1 || e[0] != (TopEntry{Key: "a", Count: 3}) {
			t.Errorf("TOP from %v: %+v, %v", reply, e, err)
		}
	}
	all := built(hitAllCall([]Limit{{Key: "{u}1", Limit: 1, Window: minute}, {Key: "{u}2", Limit: 5, Window: minute}}, AllOptions{}))
	if (MultiDecision{}).Tightest() != (Decision{}) {
		t.Error("a MultiDecision with no limit has a zero tightest")
	}
	m, err := all.Parse([]any{int64(0), []any{int64(1), int64(0), int64(9_000)}, []any{int64(2), int64(3), int64(50_000)}})
	if err != nil || m.Allowed || m.Decisions[0].Allowed || !m.Decisions[1].Allowed || m.RetryAfter() != 9*time.Second {
		t.Errorf("HITALL denied by its first limit: %+v, %v", m, err)
	}

	for name, bad := range map[string]func() error{
		"a fixed window's short reply": func() error { _, err := hit.Parse([]any{int64(1)}); return err },
		"a text for a number":          func() error { _, err := slide.Parse([]any{"1", int64(1), int64(1), int64(1), int64(1)}); return err },
		"a nil for a bucket":           func() error { _, err := bucket.Parse(nil); return err },
		"HITALL's limits miscounted":   func() error { _, err := all.Parse([]any{int64(1)}); return err },
		"a permit's reply of four":     func() error { _, err := acquire.Parse([]any{int64(1), int64(1), int64(1), int64(1)}); return err },
		"TOP's text":                   func() error { _, err := top.Parse("OK"); return err },
	} {
		if err := bad(); !errors.Is(err, ErrUnexpectedReply) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
