// Package httplimit is a net/http middleware on redis-ratelimit: rules, each a limiter on the
// requests it matches, counted per identity (a key function over the request). It is a
// func(http.Handler) http.Handler, so it fits the standard mux, chi and anything that wraps
// handlers.
//
//	mw, err := httplimit.New(rl, httplimit.Options{Rules: []httplimit.Rule{
//		{Fixed: &ratelimit.Fixed{Limit: 100, Window: time.Minute}},                            // every request
//		{Name: "api", Path: "/api/**", Sliding: &ratelimit.Sliding{Limit: 10, Window: time.Second}},
//		{Name: "writes", Methods: []string{"POST"}, GCRA: &ratelimit.Rate{MaxBurst: 9, PerPeriod: 10, Period: time.Minute}},
//		{Name: "burst-and-hour", AllOf: []ratelimit.Limit{{Limit: 10, Window: time.Second}, {Limit: 1000, Window: time.Hour}}},
//		{Name: "reports", Path: "/reports/*", InFlight: &httplimit.InFlight{Limit: 3, Lease: 30 * time.Second}},
//	}})
//	http.ListenAndServe(addr, mw(mux))
//
// A request goes through the rules that match it, in order; the first that denies answers 429
// with Retry-After (the rules before it have counted the request: use AllOf for several limits
// all or nothing). Every limited response carries the RateLimit-Policy and RateLimit fields. An
// InFlight permit is held, and renewed, until the handler returns. When the server cannot be
// reached, does not answer within Timeout or refuses a call, requests are admitted (the default)
// or refused with 503, and the server is tried again after RetryInterval.
package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// KeyFunc is a request's identity; false leaves the request unlimited by the rule.
type KeyFunc func(*http.Request) (string, bool)

// ClientIP is the peer's address (RemoteAddr without the port; behind a proxy, put the proxy's
// client address there first, or use Header).
func ClientIP(r *http.Request) (string, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr, r.RemoteAddr != ""
	}
	return host, true
}

// Header is the value of a request header (X-API-Key, say), else fallback's identity.
func Header(name string, fallback KeyFunc) KeyFunc {
	return func(r *http.Request) (string, bool) {
		if v := r.Header.Get(name); v != "" {
			return v, true
		}
		return fallback(r)
	}
}

// InFlight is at most Limit requests at once per identity, each holding a lease renewed while
// it runs.
type InFlight struct {
	Limit int64
	Lease time.Duration
}

// Rule is one limiter, on the requests it matches. Exactly one of Fixed, Sliding, GCRA, AllOf
// and InFlight is set (their Cost, Tokens and Key fields are taken as given; AllOf's keys are
// the rule's, numbered).
type Rule struct {
	// Name names the limit in the headers and in its keys: <prefix>{<name>:<identity>} (default
	// "default").
	Name string
	// Path is a glob over the path (* within a segment, ** across them); "" is every path.
	Path string
	// Methods are the methods limited; none is every method.
	Methods []string
	// Key is the identity the rule counts by (default: Options.Key).
	Key KeyFunc

	Fixed   *ratelimit.Fixed
	Sliding *ratelimit.Sliding
	GCRA    *ratelimit.Rate
	AllOf   []ratelimit.Limit
	// AllSliding: AllOf's windows slide.
	AllSliding bool
	InFlight   *InFlight
}

// Options configure the middleware.
type Options struct {
	Rules []Rule
	// Key is the identity a rule counts by where it names none (default ClientIP).
	Key KeyFunc
	// Prefix goes before every key (default "rl:").
	Prefix string
	// FailClosed: refuse with 503 when the server cannot be reached (default: admit).
	FailClosed bool
	// Timeout: a rule's call that takes longer is taken as the server unreachable (default 1 s).
	Timeout time.Duration
	// RetryInterval: after a failure, requests skip the server this long (default 1 s).
	RetryInterval time.Duration
	// OnOutage is told when the server becomes unreachable (the error) and when it answers again
	// (nil). Default: a line to Logger each time.
	OnOutage func(error)
	// Logger takes the middleware's lines: outages (unless OnOutage is set) and a key function
	// that gave what no call takes. Default: slog.Default().
	Logger *slog.Logger
}

type compiled struct {
	Rule
	path    *regexp.Regexp
	methods map[string]bool
	decide  func(ctx context.Context, l *ratelimit.Limiter, key string) ([]named, bool, time.Duration, error)
}

type named struct {
	name string
	d    ratelimit.Decision
}

func glob(pattern string) *regexp.Regexp {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		switch {
		case strings.HasPrefix(pattern[i:], "**"):
			b.WriteString(".*")
			i++
		case pattern[i] == '*':
			b.WriteString("[^/]*")
		default:
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		}
	}
	return regexp.MustCompile("^" + b.String() + "$")
}

func one(name string, d ratelimit.Decision, err error) ([]named, bool, time.Duration, error) {
	return []named{{name, d}}, d.Allowed, d.RetryAfter, err
}

// compile checks a rule now, so that a bad one fails at start-up, not on the first request.
func compile(r Rule) (compiled, error) {
	c := compiled{Rule: r}
	if c.Name == "" {
		c.Name = "default"
	}
	if r.Path != "" {
		c.path = glob(r.Path)
	}
	if len(r.Methods) > 0 {
		c.methods = map[string]bool{}
		for _, m := range r.Methods {
			c.methods[strings.ToUpper(m)] = true
		}
	}
	set := 0
	var err error
	if r.Fixed != nil {
		set++
		err = r.Fixed.Validate()
		c.decide = func(ctx context.Context, l *ratelimit.Limiter, key string) ([]named, bool, time.Duration, error) {
			d, err := l.Hit(ctx, key, *r.Fixed)
			return one(c.Name, d, err)
		}
	}
	if r.Sliding != nil {
		set++
		err = r.Sliding.Validate()
		c.decide = func(ctx context.Context, l *ratelimit.Limiter, key string) ([]named, bool, time.Duration, error) {
			d, err := l.Slide(ctx, key, *r.Sliding)
			return one(c.Name, d, err)
		}
	}
	if r.GCRA != nil {
		set++
		err = r.GCRA.Validate()
		c.decide = func(ctx context.Context, l *ratelimit.Limiter, key string) ([]named, bool, time.Duration, error) {
			d, err := l.GCRA(ctx, key, *r.GCRA)
			return one(c.Name, d, err)
		}
	}
	if len(r.AllOf) > 0 {
		set++
		limits := func(key string) []ratelimit.Limit {
			out := make([]ratelimit.Limit, len(r.AllOf))
			for i, l := range r.AllOf {
				l.Key = key + ":" + strconv.Itoa(i)
				out[i] = l
			}
			return out
		}
		options := ratelimit.AllOptions{Sliding: r.AllSliding}
		err = options.Validate(limits("k"))
		c.decide = func(ctx context.Context, l *ratelimit.Limiter, key string) ([]named, bool, time.Duration, error) {
			m, err := l.HitAll(ctx, limits(key), options)
			out := make([]named, len(m.Decisions))
			for i, d := range m.Decisions {
				out[i] = named{c.Name + "-" + strconv.Itoa(i), d}
			}
			return out, m.Allowed, m.RetryAfter(), err
		}
	}
	if r.InFlight != nil {
		set++
		switch lease := r.InFlight.Lease; {
		case r.InFlight.Limit < 1:
			err = &ratelimit.ArgumentError{Message: "limit must be an integer >= 1"}
		case lease < 3*time.Millisecond || lease%time.Millisecond != 0:
			err = &ratelimit.ArgumentError{Message: "an InFlight lease must be whole milliseconds, 3 ms or more (it is renewed every third of it)"}
		}
	}
	if set != 1 {
		return c, fmt.Errorf("httplimit: rule %q needs exactly one of Fixed, Sliding, GCRA, AllOf and InFlight", c.Name)
	}
	if err != nil {
		return c, fmt.Errorf("httplimit: rule %q: %w", c.Name, err)
	}
	return c, nil
}

type middleware struct {
	limiter *ratelimit.Limiter
	rules   []compiled
	o       Options

	mu        sync.Mutex
	down      bool
	skipUntil time.Time
}

// New is the middleware, or the error of the first bad rule.
func New(l *ratelimit.Limiter, o Options) (func(http.Handler) http.Handler, error) {
	m := &middleware{limiter: l, o: o}
	if m.o.Key == nil {
		m.o.Key = ClientIP
	}
	if m.o.Prefix == "" {
		m.o.Prefix = "rl:"
	}
	if m.o.Timeout <= 0 {
		m.o.Timeout = time.Second
	}
	if m.o.RetryInterval <= 0 {
		m.o.RetryInterval = time.Second
	}
	if m.o.Logger == nil {
		m.o.Logger = slog.Default()
	}
	if m.o.OnOutage == nil {
		what := "admitting"
		if o.FailClosed {
			what = "refusing"
		}
		m.o.OnOutage = func(err error) {
			if err == nil {
				m.o.Logger.Info("httplimit: the rate limiter answers again")
			} else {
				m.o.Logger.Warn("httplimit: the rate limiter is unreachable: "+what+" requests until it answers", "error", err)
			}
		}
	}
	for _, r := range o.Rules {
		c, err := compile(r)
		if err != nil {
			return nil, err
		}
		m.rules = append(m.rules, c)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}, nil
}

func (m *middleware) skipping() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.down && time.Now().Before(m.skipUntil)
}

// outage records whether the server answered (err nil) and tells OnOutage of each change.
func (m *middleware) outage(err error) {
	m.mu.Lock()
	changed := m.down != (err != nil)
	m.down = err != nil
	if err != nil {
		m.skipUntil = time.Now().Add(m.o.RetryInterval)
	}
	m.mu.Unlock()
	if changed {
		m.o.OnOutage(err)
	}
}

func (m *middleware) unreachable(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !m.o.FailClosed {
		next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", strconv.FormatInt(max(seconds(m.o.RetryInterval), 1), 10))
	http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if m.skipping() {
		m.unreachable(w, r, next)
		return
	}
	var decided []named
	err := m.through(w, r, next, 0, &decided)
	var argument *ratelimit.ArgumentError
	switch {
	case err == nil:
		return
	case errors.As(err, &argument):
		// Checked at New: a rule's key function gave what no call takes.
		http.Error(w, "rate limiter error", http.StatusInternalServerError)
		m.o.Logger.Error("httplimit: a rule's key function gave what no call takes", "error", err)
	default:
		// The server unreachable, slow, or refusing (READONLY in a failover, a key of another
		// type, ...): OnOutage is told, and the request goes as FailClosed says.
		m.outage(err)
		m.unreachable(w, r, next)
	}
}

// through runs rules[i:] on the request, then next; a permit is held while the rest run.
func (m *middleware) through(w http.ResponseWriter, r *http.Request, next http.Handler, i int, decided *[]named) error {
	if i == len(m.rules) {
		m.outage(nil)
		setHeaders(w.Header(), *decided, 0)
		next.ServeHTTP(w, r)
		return nil
	}
	rule := m.rules[i]
	if rule.methods != nil && !rule.methods[r.Method] || rule.path != nil && !rule.path.MatchString(r.URL.Path) {
		return m.through(w, r, next, i+1, decided)
	}
	keyOf := rule.Key
	if keyOf == nil {
		keyOf = m.o.Key
	}
	identity, ok := keyOf(r)
	if !ok {
		return m.through(w, r, next, i+1, decided)
	}
	key := m.o.Prefix + "{" + rule.Name + ":" + identity + "}"
	if rule.InFlight != nil {
		ctx, cancel := context.WithTimeout(r.Context(), m.o.Timeout)
		permit, err := m.limiter.Hold(ctx, key, rule.InFlight.Limit, rule.InFlight.Lease)
		cancel()
		var busy *ratelimit.PermitUnavailableError
		if errors.As(err, &busy) {
			m.outage(nil)
			deny(w, *decided, busy.Wait)
			return nil
		}
		if err != nil {
			return err
		}
		// Given back when the request is done, whatever happened (a failed release ends with the
		// lease).
		defer func() { _, _ = permit.End(context.WithoutCancel(r.Context())) }()
		return m.through(w, r, next, i+1, decided)
	}
	ctx, cancel := context.WithTimeout(r.Context(), m.o.Timeout)
	answers, allowed, retry, err := rule.decide(ctx, m.limiter, key)
	cancel()
	if err != nil {
		return err
	}
	*decided = append(*decided, answers...)
	if !allowed {
		m.outage(nil)
		deny(w, *decided, retry)
		return nil
	}
	return m.through(w, r, next, i+1, decided)
}

func deny(w http.ResponseWriter, decided []named, retry time.Duration) {
	setHeaders(w.Header(), decided, retry)
	http.Error(w, "too many requests", http.StatusTooManyRequests)
}

// seconds is d in whole seconds, rounded up.
func seconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds() - 1e-9))
}

// setHeaders writes every limit in RateLimit-Policy, the tightest (fewest remaining) in
// RateLimit, and Retry-After when denied (retry > 0 and not for ever).
func setHeaders(h http.Header, decided []named, retry time.Duration) {
	if retry > 0 && retry != ratelimit.Forever {
		h.Set("Retry-After", strconv.FormatInt(max(seconds(retry), 1), 10))
	}
	if len(decided) == 0 {
		return
	}
	policies := make([]string, len(decided))
	tightest := decided[0]
	for i, n := range decided {
		policy := fmt.Sprintf("%q;q=%d", n.name, n.d.Limit)
		if n.d.Window > 0 {
			policy += fmt.Sprintf(";w=%d", max(seconds(n.d.Window), 1))
		}
		policies[i] = policy
		if n.d.Remaining < tightest.d.Remaining || n.d.Remaining == tightest.d.Remaining && n.d.ResetAfter > tightest.d.ResetAfter {
			tightest = n
		}
	}
	reset := min(tightest.d.ResetAfter, time.Duration(math.MaxInt32)*time.Second)
	h.Set("RateLimit-Policy", strings.Join(policies, ", "))
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", tightest.name, tightest.d.Remaining, seconds(reset)))
}
