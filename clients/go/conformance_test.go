package ratelimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// conformanceCase is one of the shared argument cases (testkit/conformance/arguments.json): a
// line of arguments with the module's own answer, and the typed call COMMAND DOCS reads in it.
type conformanceCase struct {
	Command    string         `json:"command"`
	Args       []string       `json:"args"`
	Error      *string        `json:"error"`
	Call       map[string]any `json:"call"`
	ServerData bool           `json:"server_data"`
}

// errNotTyped: the case has a value the client's types do not take (a limit of "x", a window
// beyond time.Duration, a cost of 0, which Go's zero value reads as 1).
var errNotTyped = errors.New("not a typed call")

func typedInt(v any) (int64, error) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) >= 1<<53 {
		return 0, errNotTyped
	}
	return int64(f), nil
}

// typedCount is a count whose zero value means "the default": 0 cannot be sent.
func typedCount(c map[string]any, name string) (int64, error) {
	v, ok := c[name]
	if !ok {
		return 0, nil
	}
	n, err := typedInt(v)
	if err == nil && n == 0 {
		return 0, errNotTyped
	}
	return n, err
}

// typedWindow is a window or lease (seconds, or ms with MS), or a calendar unit.
func typedWindow(v any, ms bool) (time.Duration, Calendar, error) {
	if s, ok := v.(string); ok {
		if ms {
			return 0, "", errNotTyped
		}
		return 0, Calendar(s), nil
	}
	n, err := typedInt(v)
	unit := time.Second
	if ms {
		unit = time.Millisecond
	}
	if err != nil || n > math.MaxInt64/int64(unit) || n < math.MinInt64/int64(unit) {
		return 0, "", errNotTyped
	}
	return time.Duration(n) * unit, "", nil
}

func typedLength(v any, ms bool) (time.Duration, error) {
	d, c, err := typedWindow(v, ms)
	if err == nil && c != "" {
		err = errNotTyped
	}
	return d, err
}

// typedPeriod is GCRA's period (decimal seconds) as a Duration.
func typedPeriod(v any) (time.Duration, error) {
	f, ok := v.(float64)
	if s, isText := v.(string); isText {
		var err error
		f, err = strconv.ParseFloat(s, 64)
		ok = err == nil
	}
	ns := f * 1e9
	if !ok || math.IsNaN(ns) || math.Abs(ns) >= math.MaxInt64 || ns != math.Trunc(ns) {
		return 0, errNotTyped
	}
	return time.Duration(ns), nil
}

// conformanceCall builds a case's call as the client does (nil: the client has no such call).
// reader reads a built call's reply, as its command's parse does.
type reader func(reply any) (any, error)

// parsing is a builder's call as a reader, or its refusal.
func parsing[T any](call command[T], err error) (reader, error) {
	if err != nil {
		return nil, err
	}
	return func(reply any) (any, error) { return call.Parse(reply) }, nil
}

func conformanceCall(command string, c map[string]any) (func() (reader, error), error) {
	flag := func(name string) bool { return c[name] == true }
	text := func(name string) string { s, _ := c[name].(string); return s }
	charge, err := typedCount(c, "COST")
	if err != nil {
		return nil, err
	}
	key := fmt.Sprint(c["key"])
	limit := func() (int64, error) { return typedInt(c["limit"]) }
	flags := [2]bool{flag("PARTIAL"), flag("RESERVE")}
	switch command {
	case "ratelimit.hit":
		n, err := limit()
		w, cal, err2 := typedWindow(c["window"], flag("MS"))
		if err := errors.Join(err, err2); err != nil {
			return nil, err
		}
		f := Fixed{Limit: n, Window: w, Calendar: cal, Cost: charge, Align: flag("ALIGN"), TZ: text("TZ")}
		return map[[2]bool]func() (reader, error){
			{false, false}: func() (reader, error) { return parsing(hitCall(key, f)) },
			{true, false}:  func() (reader, error) { return parsing(hitUpToCall(key, f)) },
			{false, true}:  func() (reader, error) { return parsing(reserveHitCall(key, f)) },
			{true, true}:   func() (reader, error) { return parsing(reserveHitUpToCall(key, f)) },
		}[flags], nil
	case "ratelimit.peek":
		n, err := limit()
		return func() (reader, error) { return parsing(peekCall(key, n, cost(charge))) }, err
	case "ratelimit.slide":
		n, err := limit()
		w, err2 := typedLength(c["window"], flag("MS"))
		if err := errors.Join(err, err2); err != nil {
			return nil, err
		}
		s := Sliding{Limit: n, Window: w, Cost: charge}
		return map[[3]bool]func() (reader, error){
			{false, false, false}: func() (reader, error) { return parsing(slideCall(key, s)) },
			{false, false, true}:  func() (reader, error) { return parsing(slidePeekCall(key, s)) },
			{true, false, false}:  func() (reader, error) { return parsing(slideUpToCall(key, s)) },
			{false, true, false}:  func() (reader, error) { return parsing(reserveSlideCall(key, s)) },
			{true, true, false}:   func() (reader, error) { return parsing(reserveSlideUpToCall(key, s)) },
		}[[3]bool{flags[0], flags[1], flag("PEEK")}], nil
	case "ratelimit.gcra":
		burst, err := typedInt(c["max_burst"])
		per, err2 := typedInt(c["tokens_per_period"])
		period, err3 := typedPeriod(c["period"])
		tokens, err4 := typedCount(c, "TOKENS")
		if err := errors.Join(err, err2, err3, err4); err != nil {
			return nil, err
		}
		r := Rate{MaxBurst: burst, PerPeriod: per, Period: period, Tokens: tokens, Align: flag("ALIGN")}
		return map[[2]bool]func() (reader, error){
			{false, false}: func() (reader, error) { return parsing(gcraCall(key, r)) },
			{true, false}:  func() (reader, error) { return parsing(gcraUpToCall(key, r)) },
			{false, true}:  func() (reader, error) { return parsing(reserveGCRACall(key, r)) },
			{true, true}:   func() (reader, error) { return parsing(reserveGCRAUpToCall(key, r)) },
		}[flags], nil
	case "ratelimit.hitall":
		keys, _ := c["keys"].([]any)
		var limits []Limit
		for i, pair := range c["limits"].([]any) {
			p := pair.([]any)
			n, err := typedInt(p[0])
			w, cal, err2 := typedWindow(p[1], flag("MS"))
			if err := errors.Join(err, err2); err != nil {
				return nil, err
			}
			limits = append(limits, Limit{Key: fmt.Sprint(keys[i]), Limit: n, Window: w, Calendar: cal})
		}
		o := AllOptions{Cost: charge, Sliding: flag("SLIDE"), Align: flag("ALIGN"), TZ: text("TZ")}
		if t, ok := c["TOKENS"].([]any); ok {
			tokens, err := typedInt(t[0])
			keys, err2 := typedInt(t[1])
			if err := errors.Join(err, err2); err != nil || tokens == 0 || keys == 0 {
				return nil, errNotTyped
			}
			o.Tokens, o.TokenKeys = tokens, int(keys)
		}
		if flag("RESERVE") {
			return func() (reader, error) { return parsing(reserveAllCall(limits, o)) }, nil
		}
		return func() (reader, error) { return parsing(hitAllCall(limits, o)) }, nil
	case "ratelimit.acquire":
		n, err := limit()
		lease, err2 := typedLength(c["lease"], flag("MS"))
		if _, given := c["ID"]; given && text("ID") == "" {
			return nil, errNotTyped // "" asks the client to make an id
		}
		return func() (reader, error) { return parsing(acquireCall(key, n, lease, text("ID"))) }, errors.Join(err, err2)
	case "ratelimit.release":
		return func() (reader, error) { return parsing(releaseCall(key, fmt.Sprint(c["id"]))) }, nil
	case "ratelimit.renew":
		lease, err := typedLength(c["lease"], flag("MS"))
		return func() (reader, error) { return parsing(renewCall(key, fmt.Sprint(c["id"]), lease)) }, err
	case "ratelimit.top":
		var views []string
		for _, v := range []string{"DENIED", "ADMITTED", "SHADOWED"} {
			if flag(v) {
				views = append(views, strings.ToLower(v))
			}
		}
		count, err := typedCount(c, "COUNT")
		if err != nil || len(views) > 1 {
			return nil, errNotTyped
		}
		o := TopOptions{View: strings.Join(views, ""), Count: count, Reset: flag("RESET")}
		return func() (reader, error) { return parsing(topCall(o)) }, nil
	case "ratelimit.adapt":
		floor, err := typedInt(c["floor"])
		start, err2 := typedInt(c["start"])
		ceiling, err3 := typedInt(c["ceiling"])
		w, err4 := typedLength(c["window"], flag("MS"))
		if err := errors.Join(err, err2, err3, err4); err != nil {
			return nil, err
		}
		a := Adaptive{Floor: floor, Start: start, Ceiling: ceiling, Window: w, Cost: charge, Turn: flag("TURN")}
		return map[[2]bool]func() (reader, error){
			{false, false}: func() (reader, error) { return parsing(adaptCall(key, a)) },
			{true, false}:  func() (reader, error) { return parsing(adaptUpToCall(key, a)) },
			{false, true}:  func() (reader, error) { return parsing(reserveAdaptCall(key, a)) },
			{true, true}:   func() (reader, error) { return parsing(reserveAdaptUpToCall(key, a)) },
		}[flags], nil
	case "ratelimit.report":
		if flag("OK") == flag("THROTTLED") {
			return nil, nil // a typed report has one outcome
		}
		var n [5]int64
		for i, name := range []string{"RETRY", "LIMIT", "REMAINING", "RESET", "AGE"} {
			if v, ok := c[name]; ok {
				if n[i], err = typedInt(v); err != nil {
					return nil, err
				}
			}
		}
		_, said := c["REMAINING"]
		_, reset := c["RESET"]
		if said != reset || c["LIMIT"] == float64(0) || c["AGE"] == float64(0) {
			return nil, errNotTyped // Report takes both or neither, and a Limit or an Age of 0 as none
		}
		r := Report{Throttled: flag("THROTTLED"), RetryAfter: time.Duration(n[0]) * time.Millisecond, Limit: n[1],
			Age: time.Duration(n[4]) * time.Millisecond}
		if said {
			r.Bound = &Bound{Remaining: n[2], ResetAfter: time.Duration(n[3]) * time.Millisecond}
		}
		return func() (reader, error) { return parsing(reportCall(key, r)) }, nil
	}
	return nil, fmt.Errorf("a case of %s, which this test does not know", command)
}

// TestConformance: with no server, the client refuses exactly what the module refuses, for each
// shared case it can send as a typed call (a refusal by the module's own data, server_data, it
// may leave to the server).
func TestConformance(t *testing.T) {
	raw, err := os.ReadFile("../../testkit/conformance/arguments.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []conformanceCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	sent := 0
	for _, c := range cases {
		if c.Call == nil {
			continue
		}
		build, err := conformanceCall(c.Command, c.Call)
		if errors.Is(err, errNotTyped) || build == nil {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		_, refused := build()
		if refused != nil && !errors.Is(refused, ErrInvalidArgument) {
			t.Fatalf("%s %v: %v", c.Command, c.Args, refused)
		}
		sent++
		if c.ServerData && refused == nil {
			continue
		}
		if (refused == nil) != (c.Error == nil) {
			module := "nothing"
			if c.Error != nil {
				module = *c.Error
			}
			t.Errorf("%s %s: the module refuses with %s, the client with %v", c.Command, strings.Join(c.Args, " "), module, refused)
		}
	}
	t.Logf("%d of the %d cases sent as typed calls", sent, len(cases))
	if sent < 80 {
		t.Errorf("only %d cases sent", sent)
	}
}

// replyCase is one of the shared replies (testkit/conformance/replies.json): a call's reply on a
// server whose clock stood still, and the decision a client reads from it.
type replyCase struct {
	Command  string         `json:"command"`
	Args     []string       `json:"args"`
	Call     map[string]any `json:"call"`
	Reply    []int64        `json:"reply"`
	Decision map[string]any `json:"decision"`
}

// stated is a decision as the shared replies state it: ms, -1 for never, nil for none.
func stated(d Decision) map[string]any {
	ms := func(d time.Duration) any {
		if d == Forever {
			return -1.0
		}
		return float64(d / time.Millisecond)
	}
	out := map[string]any{"allowed": d.Allowed, "count": float64(d.Count), "remaining": float64(d.Remaining),
		"limit": float64(d.Limit), "reset_after_ms": ms(d.ResetAfter), "retry_after_ms": nil, "window_ms": nil}
	if !d.Allowed {
		out["retry_after_ms"] = ms(d.RetryAfter)
	}
	if d.Window != 0 {
		out["window_ms"] = ms(d.Window)
	}
	return out
}

// TestConformanceReplies: the client reads each shared reply as the module means it.
func TestConformanceReplies(t *testing.T) {
	raw, err := os.ReadFile("../../testkit/conformance/replies.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []replyCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		build, err := conformanceCall(c.Command, c.Call)
		if err != nil || build == nil {
			t.Fatalf("%s %v: no call (%v)", c.Command, c.Args, err)
		}
		read, err := build()
		if err != nil {
			t.Fatalf("%s %v: %v", c.Command, c.Args, err)
		}
		reply := make([]any, len(c.Reply))
		for i, n := range c.Reply {
			reply[i] = n
		}
		answer, err := read(reply)
		if err != nil {
			t.Fatalf("%s %v: %v", c.Command, c.Args, err)
		}
		var got map[string]any
		switch a := answer.(type) {
		case Decision:
			got = stated(a)
		case Grant:
			got = stated(a.Decision)
			got["granted"] = float64(a.Granted)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.Decision) {
			t.Errorf("%s %s: read %v, the module means %v", c.Command, strings.Join(c.Args, " "), got, c.Decision)
		}
	}
}
