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
func conformanceCall(command string, c map[string]any) (func() error, error) {
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
		return map[[2]bool]func() error{
			{false, false}: func() error { _, err := hitCall(key, f); return err },
			{true, false}:  func() error { _, err := hitUpToCall(key, f); return err },
			{false, true}:  func() error { _, err := reserveHitCall(key, f); return err },
			{true, true}:   func() error { _, err := reserveHitUpToCall(key, f); return err },
		}[flags], nil
	case "ratelimit.peek":
		n, err := limit()
		return func() error { _, err := peekCall(key, n, cost(charge)); return err }, err
	case "ratelimit.slide":
		n, err := limit()
		w, err2 := typedLength(c["window"], flag("MS"))
		if err := errors.Join(err, err2); err != nil {
			return nil, err
		}
		s := Sliding{Limit: n, Window: w, Cost: charge}
		return map[[3]bool]func() error{
			{false, false, false}: func() error { _, err := slideCall(key, s); return err },
			{false, false, true}:  func() error { _, err := slidePeekCall(key, s); return err },
			{true, false, false}:  func() error { _, err := slideUpToCall(key, s); return err },
			{false, true, false}:  func() error { _, err := reserveSlideCall(key, s); return err },
			{true, true, false}:   func() error { _, err := reserveSlideUpToCall(key, s); return err },
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
		return map[[2]bool]func() error{
			{false, false}: func() error { _, err := gcraCall(key, r); return err },
			{true, false}:  func() error { _, err := gcraUpToCall(key, r); return err },
			{false, true}:  func() error { _, err := reserveGCRACall(key, r); return err },
			{true, true}:   func() error { _, err := reserveGCRAUpToCall(key, r); return err },
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
			return func() error { _, err := reserveAllCall(limits, o); return err }, nil
		}
		return func() error { _, err := hitAllCall(limits, o); return err }, nil
	case "ratelimit.acquire":
		n, err := limit()
		lease, err2 := typedLength(c["lease"], flag("MS"))
		if _, given := c["ID"]; given && text("ID") == "" {
			return nil, errNotTyped // "" asks the client to make an id
		}
		return func() error { _, err := acquireCall(key, n, lease, text("ID")); return err }, errors.Join(err, err2)
	case "ratelimit.release":
		return func() error { _, err := releaseCall(key, fmt.Sprint(c["id"])); return err }, nil
	case "ratelimit.renew":
		lease, err := typedLength(c["lease"], flag("MS"))
		return func() error { _, err := renewCall(key, fmt.Sprint(c["id"]), lease); return err }, err
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
		return func() error { _, err := topCall(o); return err }, nil
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
		refused := build()
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
