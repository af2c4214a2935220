package ratelimit

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// command is one call, built and its arguments checked but not sent: its form for the module and
// for the Functions library, and how its reply reads. The Limiter's methods send them with do.
type command[T any] struct {
	// Command is the module's command (RATELIMIT.HIT ...).
	Command string
	// Function is the library's function ("" for the module's own commands, such as TOP).
	Function string
	Keys     []string
	Args     []string
	// Numkeys: the module's form names its keys' count first (HITALL).
	Numkeys bool
	// ReadOnly: the call writes nothing (PEEK, TOP), so a limiter waiting for replicas sends no WAIT.
	ReadOnly bool
	parse    func(reply any) (T, error)
}

// ModuleArgs is the call as the module takes it.
func (c command[T]) ModuleArgs() []string {
	args := []string{c.Command}
	if c.Numkeys {
		args = append(args, strconv.Itoa(len(c.Keys)))
	}
	return append(append(args, c.Keys...), c.Args...)
}

// LibraryArgs is the call as FCALL to the library.
func (c command[T]) LibraryArgs() []string {
	args := []string{"FCALL", c.Function, strconv.Itoa(len(c.Keys))}
	return append(append(args, c.Keys...), c.Args...)
}

// Parse reads the call's reply.
func (c command[T]) Parse(reply any) (T, error) { return c.parse(reply) }

// Calendar is a calendar window: it ends at the next midnight, Monday, 1st or January 1st (in TZ).
type Calendar string

// The calendar windows.
const (
	Day   Calendar = "day"
	Week  Calendar = "week"
	Month Calendar = "month"
	Year  Calendar = "year"
)

// Fixed is a fixed-window limit (HIT): Limit per Window, or per Calendar unit.
type Fixed struct {
	Limit int64
	// Window is the window's length (whole milliseconds), from the first hit (or, with Align,
	// at multiples of it since the Unix epoch).
	Window time.Duration
	// Calendar is a calendar window instead of Window.
	Calendar Calendar
	// Cost is what the call counts for (0 means 1); a negative one gives back.
	Cost  int64
	Align bool
	// TZ is a calendar window's zone: UTC, an offset such as +05:30, or a name (the module only).
	TZ string
}

// Sliding is a sliding-window limit (SLIDE).
type Sliding struct {
	Limit  int64
	Window time.Duration
	// Cost is what the call counts for (0 means 1); a negative one gives back.
	Cost int64
}

// Rate is a GCRA bucket: a burst of MaxBurst + 1, then PerPeriod tokens every Period.
type Rate struct {
	MaxBurst  int64
	PerPeriod int64
	Period    time.Duration
	// Tokens is what the call takes (0 means 1); negative ones are given back.
	Tokens int64
	// Align brings the tokens back PerPeriod at once, at each multiple of Period since the Unix
	// epoch (Spring Cloud Gateway's bucket, with Period a second). Not with a reservation.
	Align bool
}

// Limit is one key's limit in HITALL.
type Limit struct {
	Key      string
	Limit    int64
	Window   time.Duration
	Calendar Calendar
}

// AllOptions are HITALL's options.
type AllOptions struct {
	// Cost is what the call counts for on each limit (0 means 1).
	Cost int64
	// Sliding windows instead of fixed ones.
	Sliding bool
	Align   bool
	TZ      string
	// Tokens, when > 0, is counted on the last TokenKeys limits instead of Cost (LLM tokens
	// beside a request count).
	Tokens    int64
	TokenKeys int
}

// Validate reports whether Hit would take f, with no round trip: nil, or an *ArgumentError (for
// a limit read from a configuration, checked when it is read).
func (f Fixed) Validate() error {
	_, err := hitCall("", f)
	return err
}

// Validate reports whether Slide would take s, with no round trip: nil, or an *ArgumentError.
func (s Sliding) Validate() error {
	_, err := slideCall("", s)
	return err
}

// Validate reports whether GCRA would take r, with no round trip: nil, or an *ArgumentError.
func (r Rate) Validate() error {
	_, err := gcraCall("", r)
	return err
}

// Validate reports whether HitAll would take limits with these options, with no round trip: nil,
// or an *ArgumentError.
func (o AllOptions) Validate(limits []Limit) error {
	_, err := hitAllCall(limits, o)
	return err
}

// TopOptions are TOP's: the view ("denied", the default; "admitted"; "shadowed"), how many keys
// (0: the server's default), and whether to reset the counts.
type TopOptions struct {
	View  string
	Count int64
	Reset bool
}

const maxWindow = time.Duration(math.MaxInt64)

func positive(n int64, name string) error {
	if n < 1 {
		return invalid(name + " must be an integer >= 1")
	}
	return nil
}

// cost is a call's cost: 0 means 1.
func cost(n int64) int64 {
	if n == 0 {
		return 1
	}
	return n
}

// length is a window or lease as sent: whole seconds, or milliseconds with MS.
func length(d time.Duration, name string) (text string, inMS bool, err error) {
	switch {
	case d < time.Millisecond || d%time.Millisecond != 0 || d > maxWindow:
		return "", false, invalid(name + " must be a whole number of milliseconds >= 1ms")
	default:
		inMS = d%time.Second != 0
		return inWhole(d, inMS), inMS, nil
	}
}

// inWhole is a checked length as sent: in seconds, or in milliseconds with MS.
func inWhole(d time.Duration, inMS bool) string {
	if inMS {
		return strconv.FormatInt(int64(d/time.Millisecond), 10)
	}
	return strconv.FormatInt(int64(d/time.Second), 10)
}

func calendarUnit(c Calendar) error {
	switch c {
	case Day, Week, Month, Year:
		return nil
	}
	return invalid("window must be a length or day, week, month or year, not " + strconv.Quote(string(c)))
}

// fixedWindow is a HIT window as sent: a calendar unit or a length.
func fixedWindow(w time.Duration, c Calendar) (text string, inMS bool, err error) {
	if c != "" {
		if w != 0 {
			return "", false, invalid("give a Window or a Calendar, not both")
		}
		return string(c), false, calendarUnit(c)
	}
	return length(w, "window")
}

func laidOnClock(calendar bool, align bool, tz string) ([]string, error) {
	var args []string
	if align {
		args = append(args, "ALIGN")
	}
	if tz != "" {
		if !calendar {
			return nil, invalid("TZ needs a calendar window (day, week, month or year)")
		}
		args = append(args, "TZ", tz)
	}
	return args, nil
}

func signedCost(n int64, name string) []string {
	if n == 1 {
		return nil
	}
	return []string{name, strconv.FormatInt(n, 10)}
}

// granting is call with PARTIAL: its decision (read by decision from its first numbers
// elements), then the count granted.
func granting(call command[Decision], decision func(any) (Decision, error), numbers int, err error) (command[Grant], error) {
	if err != nil {
		return command[Grant]{}, err
	}
	name := strings.TrimPrefix(call.Command, "RATELIMIT.") + " PARTIAL"
	parse := func(reply any) (Grant, error) {
		items, ok := reply.([]any)
		if !ok || len(items) != numbers+1 {
			return Grant{}, replyError(name, reply)
		}
		granted, ok := integer(items[numbers])
		d, err := decision(items[:numbers])
		if !ok || err != nil {
			return Grant{}, replyError(name, reply)
		}
		return Grant{Decision: d, Granted: granted}, nil
	}
	return command[Grant]{Command: call.Command, Function: call.Function, Keys: call.Keys,
		Args: append(call.Args, "PARTIAL"), parse: parse}, nil
}

// amount is a give-back's amount, at least 1: the cost (or tokens) it sends is its negative.
func amount(n int64) (int64, error) {
	if n < 1 {
		return 0, invalid("amount must be an integer >= 1")
	}
	return -n, nil
}

// reserving is call with RESERVE: its decision and the reservation that ends the reply.
func reserving(call command[Decision], amount int64, name string, err error) (command[Reservation], error) {
	if err != nil {
		return command[Reservation]{}, err
	}
	if amount < 1 {
		return command[Reservation]{}, invalid("RESERVE needs " + name + " >= 1")
	}
	parse := func(reply any) (Reservation, error) {
		items, ok := reply.([]any)
		if !ok || len(items) == 0 {
			return Reservation{}, replyError("a reservation", reply)
		}
		d, err := call.parse(items[:len(items)-1])
		token, _ := items[len(items)-1].(string)
		return Reservation{Decision: d, Key: call.Keys[0], Token: token, Amount: amount}, err
	}
	return command[Reservation]{Command: call.Command, Function: call.Function, Keys: call.Keys,
		Args: append(call.Args, "RESERVE"), parse: parse}, nil
}

// reservingUpTo is call with PARTIAL and RESERVE: as many of amount as the limit has room
// for, at least one, counted now, and a reservation of what was granted (its Amount). decision
// reads the reply's first numbers, which the count granted and the reservation follow.
func reservingUpTo(call command[Decision], amount int64, decision func(any) (Decision, error), numbers int,
	err error) (command[Reservation], error) {
	if err != nil {
		return command[Reservation]{}, err
	}
	if amount < 1 {
		return command[Reservation]{}, invalid("PARTIAL needs COST >= 1")
	}
	name := strings.TrimPrefix(call.Command, "RATELIMIT.") + " PARTIAL RESERVE"
	parse := func(reply any) (Reservation, error) {
		items, ok := reply.([]any)
		if !ok || len(items) != numbers+2 {
			return Reservation{}, replyError(name, reply)
		}
		granted, ok := integer(items[numbers])
		d, err := decision(items[:numbers])
		if !ok || err != nil {
			return Reservation{}, replyError(name, reply)
		}
		token, _ := items[numbers+1].(string)
		return Reservation{Decision: d, Key: call.Keys[0], Token: token, Amount: granted}, nil
	}
	return command[Reservation]{Command: call.Command, Function: call.Function, Keys: call.Keys,
		Args: append(call.Args, "PARTIAL", "RESERVE"), parse: parse}, nil
}
