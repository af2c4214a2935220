package ratelimit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/resp"
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

func readFixed(limit int64, window time.Duration, cost int64) func(any) (Decision, error) {
	return func(reply any) (Decision, error) {
		n, ok := integers(reply, 4)
		if !ok {
			return Decision{}, replyError("a fixed window", reply)
		}
		d := Decision{Allowed: n[0] == 1, Count: n[1], Remaining: n[2], Limit: limit, ResetAfter: ms(n[3]), Window: window}
		if !d.Allowed {
			d.RetryAfter = d.ResetAfter
			if cost > limit {
				d.RetryAfter = Forever
			}
		}
		return d, nil
	}
}

func readSliding(limit int64, window time.Duration) func(any) (Decision, error) {
	return func(reply any) (Decision, error) {
		n, ok := integers(reply, 5)
		if !ok {
			return Decision{}, replyError("a sliding window", reply)
		}
		d := Decision{Allowed: n[0] == 1, Count: n[1], Remaining: n[2], Limit: limit, ResetAfter: ms(n[4]), Window: window}
		if !d.Allowed {
			d.RetryAfter = ms(n[3])
		}
		return d, nil
	}
}

func readBucket(period time.Duration) func(any) (Decision, error) {
	return func(reply any) (Decision, error) {
		n, ok := integers(reply, 5)
		if !ok {
			return Decision{}, replyError("a GCRA bucket", reply)
		}
		d := Decision{Allowed: n[0] == 0, Count: n[1] - n[2], Remaining: n[2], Limit: n[1], ResetAfter: ms(n[4]), Window: period}
		if !d.Allowed {
			d.RetryAfter = ms(n[3])
		}
		return d, nil
	}
}

// hitCall is RATELIMIT.HIT: a fixed window counted, its expiry set in the same step.
func hitCall(key string, f Fixed) (command[Decision], error) {
	if err := positive(f.Limit, "limit"); err != nil {
		return command[Decision]{}, err
	}
	window, inMS, err := fixedWindow(f.Window, f.Calendar)
	if err != nil {
		return command[Decision]{}, err
	}
	clock, err := laidOnClock(f.Calendar != "", f.Align, f.TZ)
	if err != nil {
		return command[Decision]{}, err
	}
	c := cost(f.Cost)
	args := append([]string{strconv.FormatInt(f.Limit, 10), window}, signedCost(c, "COST")...)
	if inMS {
		args = append(args, "MS")
	}
	args = append(args, clock...)
	return command[Decision]{Command: "RATELIMIT.HIT", Function: "ratelimit_hit", Keys: []string{key}, Args: args,
		parse: readFixed(f.Limit, f.Window, c)}, nil
}

// peekCall is RATELIMIT.PEEK: whether a HIT of cost would be admitted, writing nothing.
func peekCall(key string, limit, c int64) (command[Decision], error) {
	if err := positive(limit, "limit"); err != nil {
		return command[Decision]{}, err
	}
	c = cost(c)
	if err := positive(c, "COST"); err != nil {
		return command[Decision]{}, err
	}
	args := append([]string{strconv.FormatInt(limit, 10)}, signedCost(c, "COST")...)
	return command[Decision]{Command: "RATELIMIT.PEEK", Function: "ratelimit_peek", Keys: []string{key}, Args: args, ReadOnly: true,
		parse: readFixed(limit, 0, c)}, nil
}

func slideArgs(s Sliding) ([]string, error) {
	if err := positive(s.Limit, "limit"); err != nil {
		return nil, err
	}
	window, inMS, err := length(s.Window, "window")
	if err != nil {
		return nil, err
	}
	args := append([]string{strconv.FormatInt(s.Limit, 10), window}, signedCost(cost(s.Cost), "COST")...)
	if inMS {
		args = append(args, "MS")
	}
	return args, nil
}

// slideCall is RATELIMIT.SLIDE: a sliding window (the previous window weighted by its overlap).
func slideCall(key string, s Sliding) (command[Decision], error) {
	args, err := slideArgs(s)
	if err != nil {
		return command[Decision]{}, err
	}
	return command[Decision]{Command: "RATELIMIT.SLIDE", Function: "ratelimit_slide", Keys: []string{key}, Args: args,
		parse: readSliding(s.Limit, s.Window)}, nil
}

// slidePeekCall is RATELIMIT.SLIDE with PEEK: the decision without counting.
func slidePeekCall(key string, s Sliding) (command[Decision], error) {
	call, err := slideCall(key, s)
	call.Args, call.ReadOnly = append(call.Args, "PEEK"), true
	return call, err
}

// hitAllCall is RATELIMIT.HITALL: one call counted against several limits, all or nothing.
func hitAllCall(limits []Limit, o AllOptions) (command[MultiDecision], error) {
	fail := func(err error) (command[MultiDecision], error) { return command[MultiDecision]{}, err }
	if len(limits) == 0 {
		return fail(invalid("HITALL needs at least one limit"))
	}
	keys, pairs := make([]string, len(limits)), make([]string, 0, 2*len(limits))
	anyMS, calendar := false, false
	seen := make(map[string]bool, len(limits))
	for _, l := range limits {
		if seen[l.Key] {
			return fail(invalid("each key may be given only once"))
		}
		seen[l.Key] = true
		_, inMS, err := fixedWindow(l.Window, l.Calendar)
		if err != nil {
			return fail(err)
		}
		if err := positive(l.Limit, "limit"); err != nil {
			return fail(err)
		}
		anyMS, calendar = anyMS || inMS, calendar || l.Calendar != ""
	}
	if o.Sliding && calendar {
		return fail(invalid("SLIDE and a calendar window cannot be given together"))
	}
	for i, l := range limits {
		keys[i] = l.Key
		// One unit for all the lengths: ms if any needs them.
		window := string(l.Calendar)
		if window == "" {
			window = inWhole(l.Window, anyMS)
		}
		pairs = append(pairs, strconv.FormatInt(l.Limit, 10), window)
	}
	c := cost(o.Cost)
	if err := positive(c, "COST"); err != nil {
		return fail(err)
	}
	args := append(pairs, signedCost(c, "COST")...)
	if anyMS {
		args = append(args, "MS")
	}
	if o.Sliding {
		if o.Align {
			return fail(invalid("SLIDE and ALIGN cannot be given together"))
		}
		args = append(args, "SLIDE")
	}
	clock, err := laidOnClock(calendar, o.Align, o.TZ)
	if err != nil {
		return fail(err)
	}
	args = append(args, clock...)
	costs := make([]int64, len(limits))
	for i := range costs {
		costs[i] = c
	}
	if o.Tokens != 0 || o.TokenKeys != 0 {
		if err := positive(o.Tokens, "TOKENS"); err != nil {
			return fail(err)
		}
		if o.TokenKeys < 1 || o.TokenKeys > len(limits) {
			return fail(invalid("TOKENS' key count must be between 1 and numkeys"))
		}
		for i := len(limits) - o.TokenKeys; i < len(limits); i++ {
			costs[i] = o.Tokens
		}
		args = append(args, "TOKENS", strconv.FormatInt(o.Tokens, 10), strconv.Itoa(o.TokenKeys))
	}
	parse := func(reply any) (MultiDecision, error) {
		items, ok := reply.([]any)
		if !ok || len(items) != len(limits)+1 {
			return MultiDecision{}, replyError("HITALL", reply)
		}
		allowed, _ := integer(items[0])
		m := MultiDecision{Allowed: allowed == 1, Decisions: make([]Decision, len(limits))}
		for i, l := range limits {
			var d Decision
			var err error
			if o.Sliding {
				n, ok := integers(items[i+1], 4)
				if !ok {
					return MultiDecision{}, replyError("HITALL", reply)
				}
				fits := int64(0)
				if n[2] < 0 {
					fits = 1
				}
				d, err = readSliding(l.Limit, l.Window)([]any{fits, n[0], n[1], n[2], n[3]})
			} else {
				n, ok := integers(items[i+1], 3)
				if !ok {
					return MultiDecision{}, replyError("HITALL", reply)
				}
				fits := int64(0)
				if m.Allowed || n[0]+costs[i] <= l.Limit {
					fits = 1
				}
				d, err = readFixed(l.Limit, l.Window, costs[i])([]any{fits, n[0], n[1], n[2]})
			}
			if err != nil {
				return MultiDecision{}, err
			}
			m.Decisions[i] = d
		}
		return m, nil
	}
	return command[MultiDecision]{Command: "RATELIMIT.HITALL", Function: "ratelimit_hitall", Keys: keys, Args: args,
		Numkeys: true, parse: parse}, nil
}

// periodText is a GCRA period in decimal seconds, to the nanosecond.
func periodText(d time.Duration) string {
	text := fmt.Sprintf("%d.%09d", d/time.Second, d%time.Second)
	return strings.TrimSuffix(strings.TrimRight(text, "0"), ".")
}

// maxSpan is the module's bound on a bucket's spans in ns: half of int64.
const maxSpan = math.MaxInt64 / 2

// gcraSpans refuses a bucket whose spans in ns would pass maxSpan, as the module does.
func gcraSpans(r Rate) error {
	within := maxSpan / max(int64(r.Period)/r.PerPeriod, 1)
	if r.MaxBurst >= within {
		return invalid("(max_burst + 1) * period / tokens_per_period would cause an overflow")
	}
	tokens := cost(r.Tokens)
	if tokens > within || tokens < -within {
		return invalid("TOKENS * period / tokens_per_period would cause an overflow")
	}
	return nil
}

// gcraCall is RATELIMIT.GCRA: tokens from a GCRA bucket (smooth limiting).
func gcraCall(key string, r Rate) (command[Decision], error) {
	if r.MaxBurst < 0 {
		return command[Decision]{}, invalid("max_burst must be an integer >= 0")
	}
	if err := positive(r.PerPeriod, "tokens_per_period"); err != nil {
		return command[Decision]{}, err
	}
	if r.Period <= 0 {
		return command[Decision]{}, invalid("period must be > 0")
	}
	if err := gcraSpans(r); err != nil {
		return command[Decision]{}, err
	}
	args := []string{strconv.FormatInt(r.MaxBurst, 10), strconv.FormatInt(r.PerPeriod, 10), periodText(r.Period)}
	args = append(args, signedCost(cost(r.Tokens), "TOKENS")...)
	if r.Align {
		args = append(args, "ALIGN")
	}
	return command[Decision]{Command: "RATELIMIT.GCRA", Function: "ratelimit_gcra", Keys: []string{key}, Args: args,
		parse: readBucket(r.Period)}, nil
}

// gcraUpToCall is RATELIMIT.GCRA with PARTIAL: as many of r.Tokens as the bucket has whole, at
// least one. Granted fewer than asked, the bucket is left empty (the part of the next token goes
// with them); none, it is denied until one comes back.
func gcraUpToCall(key string, r Rate) (command[Grant], error) {
	if err := positive(cost(r.Tokens), "TOKENS"); err != nil {
		return command[Grant]{}, err
	}
	call, err := gcraCall(key, r)
	if err != nil {
		return command[Grant]{}, err
	}
	parse := func(reply any) (Grant, error) {
		items, ok := reply.([]any)
		if !ok || len(items) != 6 {
			return Grant{}, replyError("GCRA PARTIAL", reply)
		}
		granted, ok := integer(items[5])
		d, err := call.parse(items[:5])
		if !ok || err != nil {
			return Grant{}, replyError("GCRA PARTIAL", reply)
		}
		return Grant{Decision: d, Granted: granted}, nil
	}
	return command[Grant]{Command: call.Command, Function: call.Function, Keys: call.Keys, Args: append(call.Args, "PARTIAL"),
		parse: parse}, nil
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

// reserveHitCall is RATELIMIT.HIT with RESERVE: f.Cost (the estimate) counted now, and a
// reservation to settle with what was used.
func reserveHitCall(key string, f Fixed) (command[Reservation], error) {
	call, err := hitCall(key, f)
	return reserving(call, cost(f.Cost), "COST", err)
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

// reserveHitUpToCall is RATELIMIT.HIT with PARTIAL and RESERVE.
func reserveHitUpToCall(key string, f Fixed) (command[Reservation], error) {
	call, err := hitCall(key, f)
	// Denied only with none left: then again when the window ends, whatever the cost.
	return reservingUpTo(call, cost(f.Cost), readFixed(f.Limit, f.Window, 1), 4, err)
}

// reserveSlideUpToCall is RATELIMIT.SLIDE with PARTIAL and RESERVE (a denial's retry is for one).
func reserveSlideUpToCall(key string, s Sliding) (command[Reservation], error) {
	call, err := slideCall(key, s)
	return reservingUpTo(call, cost(s.Cost), call.parse, 5, err)
}

// reserveSlideCall is RATELIMIT.SLIDE with RESERVE.
func reserveSlideCall(key string, s Sliding) (command[Reservation], error) {
	call, err := slideCall(key, s)
	return reserving(call, cost(s.Cost), "COST", err)
}

// reserveGCRACall is RATELIMIT.GCRA with RESERVE.
func reserveGCRACall(key string, r Rate) (command[Reservation], error) {
	if r.Align {
		// A settle gives back against the running clock, not the boundaries.
		return command[Reservation]{}, invalid("ALIGN and RESERVE cannot be given together")
	}
	call, err := gcraCall(key, r)
	return reserving(call, cost(r.Tokens), "TOKENS", err)
}

// reserveAllCall is RATELIMIT.HITALL with TOKENS and RESERVE: the request's limits decided
// together, its estimated tokens (o.Tokens) counted on the last o.TokenKeys (default 1) limits and
// reserved there.
func reserveAllCall(limits []Limit, o AllOptions) (command[MultiReservation], error) {
	if o.TokenKeys == 0 {
		o.TokenKeys = 1
	}
	if o.Tokens < 1 {
		return command[MultiReservation]{}, invalid("RESERVE needs TOKENS >= 1")
	}
	call, err := hitAllCall(limits, o)
	if err != nil {
		return command[MultiReservation]{}, err
	}
	tokenKeys := call.Keys[len(call.Keys)-o.TokenKeys:]
	parse := func(reply any) (MultiReservation, error) {
		items, ok := reply.([]any)
		if !ok || len(items) == 0 {
			return MultiReservation{}, replyError("a reservation", reply)
		}
		m, err := call.parse(items[:len(items)-1])
		token, _ := items[len(items)-1].(string)
		return MultiReservation{MultiDecision: m, Keys: tokenKeys, Token: token, Amount: o.Tokens}, err
	}
	return command[MultiReservation]{Command: call.Command, Function: call.Function, Keys: call.Keys,
		Args: append(call.Args, "RESERVE"), Numkeys: true, parse: parse}, nil
}

// readSettled reads one key's SETTLE reply: the reserving command's numbers, what was applied,
// then what the reservation was of (its limiter, its limit, its window in ms: -1 for none), so
// that the reservation itself stays opaque.
func readSettled(reply any) (Settlement, error) {
	items, ok := reply.([]any)
	if !ok || len(items) < 5 {
		return Settlement{}, replyError("SETTLE", reply)
	}
	n := len(items)
	kind, _ := items[n-3].(string)
	limit, okLimit := integer(items[n-2])
	windowMS, okWindow := integer(items[n-1])
	applied, okApplied := integer(items[n-4])
	if !okLimit || !okWindow || !okApplied {
		return Settlement{}, replyError("SETTLE", reply)
	}
	window := time.Duration(0)
	if windowMS > 0 {
		window = ms(windowMS)
	}
	var read func(any) (Decision, error)
	switch kind {
	case "fixed":
		read = readFixed(limit, window, 1)
	case "sliding":
		read = readSliding(limit, window)
	default:
		read = readBucket(0)
	}
	d, err := read(items[:n-4])
	return Settlement{Decision: d, Applied: applied}, err
}

// settleCall is RATELIMIT.SETTLE: a reservation settled with what was used. The unused part goes
// back to the window it was counted in while that still counts; more than reserved is charged to
// the current one. At most once: settled again (a retry), it changes nothing and answers what the
// first applied.
func settleCall(r Reservation, used int64) (command[Settlement], error) {
	args, err := settleArgs(r.Token, used)
	if err != nil {
		return command[Settlement]{}, err
	}
	return command[Settlement]{Command: "RATELIMIT.SETTLE", Function: "ratelimit_settle", Keys: []string{r.Key},
		Args: args, parse: readSettled}, nil
}

// settleArgs are SETTLE's arguments after its keys, checked.
func settleArgs(token string, used int64) ([]string, error) {
	if used < 0 {
		return nil, invalid("used must be an integer >= 0")
	}
	if token == "" {
		return nil, invalid("a denied call has no reservation to settle")
	}
	return []string{token, strconv.FormatInt(used, 10)}, nil
}

// settleAllCall is RATELIMIT.SETTLE of a HITALL reservation: one Settlement per token key.
func settleAllCall(r MultiReservation, used int64) (command[[]Settlement], error) {
	args, err := settleArgs(r.Token, used)
	if err != nil {
		return command[[]Settlement]{}, err
	}
	parse := func(reply any) ([]Settlement, error) {
		// One key's reply is flat, several keys' one per key.
		if len(r.Keys) == 1 {
			s, err := readSettled(reply)
			return []Settlement{s}, err
		}
		items, ok := reply.([]any)
		if !ok || len(items) != len(r.Keys) {
			return nil, replyError("SETTLE", reply)
		}
		out := make([]Settlement, len(items))
		for i, item := range items {
			s, err := readSettled(item)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	return command[[]Settlement]{Command: "RATELIMIT.SETTLE", Function: "ratelimit_settle", Keys: r.Keys,
		Args: args, parse: parse}, nil
}

// newLeaseID is a fresh lease id (128 random bits in hex).
func newLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

const maxIDLen = 256

func leaseID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return invalid("ID must be 1 to 256 bytes")
	}
	return nil
}

func leaseArgs(lease time.Duration) ([]string, error) {
	text, inMS, err := length(lease, "lease")
	if inMS {
		return []string{text, "MS"}, err
	}
	return []string{text}, err
}

// acquireCall is RATELIMIT.ACQUIRE: one of at most limit permits in flight, a lease under id ("":
// a new one); a retry with the same id is counted once.
func acquireCall(key string, limit int64, lease time.Duration, id string) (command[Acquisition], error) {
	if err := positive(limit, "limit"); err != nil {
		return command[Acquisition]{}, err
	}
	if id == "" {
		id = newLeaseID()
	}
	if err := leaseID(id); err != nil {
		return command[Acquisition]{}, err
	}
	leased, err := leaseArgs(lease)
	if err != nil {
		return command[Acquisition]{}, err
	}
	args := append(append([]string{strconv.FormatInt(limit, 10)}, leased...), "ID", id)
	parse := func(reply any) (Acquisition, error) {
		items, ok := reply.([]any)
		if !ok || len(items) != 5 {
			return Acquisition{}, replyError("ACQUIRE", reply)
		}
		n, ok := integers(items[:4], 4)
		if !ok {
			return Acquisition{}, replyError("ACQUIRE", reply)
		}
		held, _ := items[4].(string)
		return Acquisition{Acquired: n[0] == 1, InUse: n[1], Remaining: n[2], Wait: ms(n[3]), ID: held}, nil
	}
	return command[Acquisition]{Command: "RATELIMIT.ACQUIRE", Function: "ratelimit_acquire", Keys: []string{key},
		Args: args, parse: parse}, nil
}

// releaseCall is RATELIMIT.RELEASE: the permit under id given back; false if it was not live.
func releaseCall(key, id string) (command[bool], error) {
	if err := leaseID(id); err != nil {
		return command[bool]{}, err
	}
	parse := func(reply any) (bool, error) {
		n, ok := integer(reply)
		if !ok {
			return false, replyError("RELEASE", reply)
		}
		return n == 1, nil
	}
	return command[bool]{Command: "RATELIMIT.RELEASE", Function: "ratelimit_release", Keys: []string{key},
		Args: []string{id}, parse: parse}, nil
}

// renewCall is RATELIMIT.RENEW: the live lease under id extended to lease from now; the lease it
// now has, or 0 when it was lost (stop, or acquire again).
func renewCall(key, id string, lease time.Duration) (command[time.Duration], error) {
	if err := leaseID(id); err != nil {
		return command[time.Duration]{}, err
	}
	leased, err := leaseArgs(lease)
	if err != nil {
		return command[time.Duration]{}, err
	}
	parse := func(reply any) (time.Duration, error) {
		n, ok := integer(reply)
		if !ok {
			return 0, replyError("RENEW", reply)
		}
		if n < 0 {
			return 0, nil
		}
		return ms(n), nil
	}
	return command[time.Duration]{Command: "RATELIMIT.RENEW", Function: "ratelimit_renew", Keys: []string{key},
		Args: append([]string{id}, leased...), parse: parse}, nil
}

// topCall is RATELIMIT.TOP (the module only): the keys this node denied most (or admitted the
// most cost for, or would have denied in shadow mode) lately, each count with its error bound.
func topCall(o TopOptions) (command[[]TopEntry], error) {
	view := strings.ToUpper(o.View)
	switch view {
	case "":
		view = "DENIED"
	case "DENIED", "ADMITTED", "SHADOWED":
	default:
		return command[[]TopEntry]{}, invalid(`view must be "denied", "admitted" or "shadowed"`)
	}
	args := []string{view}
	if o.Count != 0 {
		if err := positive(o.Count, "COUNT"); err != nil {
			return command[[]TopEntry]{}, err
		}
		args = append(args, "COUNT", strconv.FormatInt(o.Count, 10))
	}
	if o.Reset {
		args = append(args, "RESET")
	}
	parse := func(reply any) ([]TopEntry, error) {
		rows, ok := reply.([]any)
		if !ok {
			return nil, replyError("TOP", reply)
		}
		entries := make([]TopEntry, 0, len(rows))
		for _, row := range rows {
			fields := resp.Fields(row)
			key, _ := fields["key"].(string)
			count, _ := integer(fields["count"])
			bound, _ := integer(fields["error"])
			entries = append(entries, TopEntry{Key: key, Count: count, Error: bound})
		}
		return entries, nil
	}
	return command[[]TopEntry]{Command: "RATELIMIT.TOP", Keys: nil, Args: args, ReadOnly: true, parse: parse}, nil
}
