package tests

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/resp"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlgoredis"
	"github.com/redis/go-redis/v9"
)

// Where each documented argument of each command is taken: a Limiter method's parameter
// ("param"), a field of an options type, or a form the calls fold it into ("folded").
var taken = map[string]map[string]string{
	"ratelimit.hit": {"key": "param", "limit": "Fixed.Limit", "window": "Fixed.Window", "cost": "Fixed.Cost",
		"ms": "folded", "partial": "folded", "reserve": "folded", "align": "Fixed.Align", "zone": "Fixed.TZ"},
	"ratelimit.peek":  {"key": "param", "limit": "param", "cost": "param"},
	"ratelimit.slide": {"key": "param", "limit": "Sliding.Limit", "window": "Sliding.Window", "cost": "Sliding.Cost", "ms": "folded", "partial": "folded", "peek": "folded", "reserve": "folded"},
	"ratelimit.hitall": {"numkeys": "folded", "key": "Limit.Key", "limit": "Limit.Limit", "window": "Limit.Window",
		"cost": "AllOptions.Cost", "ms": "folded", "slide": "AllOptions.Sliding", "align": "AllOptions.Align", "zone": "AllOptions.TZ",
		"tokens": "AllOptions.Tokens", "numtokenkeys": "AllOptions.TokenKeys", "reserve": "folded"},
	"ratelimit.gcra": {"key": "param", "max_burst": "Rate.MaxBurst", "tokens_per_period": "Rate.PerPeriod", "period": "Rate.Period",
		"count": "Rate.Tokens", "partial": "folded", "reserve": "folded", "align": "Rate.Align"},
	"ratelimit.settle":  {"key": "Reservation.Key", "reservation": "Reservation.Token", "used": "param"},
	"ratelimit.acquire": {"key": "param", "limit": "param", "lease": "param", "ms": "folded", "id": "param"},
	"ratelimit.release": {"key": "param", "id": "param"},
	"ratelimit.renew":   {"key": "param", "id": "param", "lease": "param", "ms": "folded"},
	"ratelimit.top":     {"denied": "TopOptions.View", "admitted": "TopOptions.View", "shadowed": "TopOptions.View", "count": "TopOptions.Count", "reset": "TopOptions.Reset"},
	"ratelimit.adapt": {"key": "param", "floor": "Adaptive.Floor", "start": "Adaptive.Start", "ceiling": "Adaptive.Ceiling",
		"window": "Adaptive.Window", "cost": "Adaptive.Cost", "ms": "folded", "partial": "folded", "reserve": "folded",
		"turn": "Adaptive.Turn"},
	"ratelimit.report": {"key": "param", "ok": "Report.Throttled", "throttled": "Report.Throttled", "retry": "Report.RetryAfter",
		"limit": "Report.Limit", "remaining": "Bound.Remaining", "reset": "Bound.ResetAfter", "age": "Report.Age"},
}

var types = map[string]reflect.Type{
	"Fixed": reflect.TypeFor[ratelimit.Fixed](), "Sliding": reflect.TypeFor[ratelimit.Sliding](),
	"Limit": reflect.TypeFor[ratelimit.Limit](), "AllOptions": reflect.TypeFor[ratelimit.AllOptions](),
	"Rate": reflect.TypeFor[ratelimit.Rate](), "Reservation": reflect.TypeFor[ratelimit.Reservation](),
	"TopOptions": reflect.TypeFor[ratelimit.TopOptions](),
	"Adaptive":   reflect.TypeFor[ratelimit.Adaptive](), "Report": reflect.TypeFor[ratelimit.Report](),
	"Bound": reflect.TypeFor[ratelimit.Bound](),
}

// recording is a Conn that keeps every module command sent through it.
type recording struct {
	ratelimit.Conn
	sent map[string][][]string
}

func (r *recording) Do(ctx context.Context, keyPos int, args []string) (any, error) {
	if name := strings.ToLower(args[0]); len(args) > 1 && strings.HasPrefix(name, "ratelimit.") {
		r.sent[name] = append(r.sent[name], args)
	}
	return r.Conn.Do(ctx, keyPos, args)
}

// Each call with every option set, as the Limiter sends it to the module. The replies do not
// matter (the reservation is made up): the words sent do.
func everyOption(t *testing.T, rdb *redis.Client) map[string][][]string {
	t.Helper()
	conn := &recording{Conn: rlgoredis.Conn{Client: rdb}, sent: map[string][][]string{}}
	l := ratelimit.New(conn)
	ctx := context.Background()
	sent := func(_ any, err error) {
		var argument *ratelimit.ArgumentError
		if errors.As(err, &argument) {
			t.Fatal(err)
		}
	}
	sent(l.Hit(ctx, "k", ratelimit.Fixed{Limit: 5, Calendar: ratelimit.Month, Cost: 2, Align: true, TZ: "Europe/Paris"}))
	sent(l.ReserveHit(ctx, "k", ratelimit.Fixed{Limit: 5, Window: 1500 * time.Millisecond, Cost: 2}))
	sent(l.ReserveHitUpTo(ctx, "k", ratelimit.Fixed{Limit: 5, Window: time.Minute, Cost: 9}))
	sent(l.Peek(ctx, "k", 5, 2))
	sent(l.SlidePeek(ctx, "k", ratelimit.Sliding{Limit: 5, Window: 1500 * time.Millisecond, Cost: 2}))
	sent(l.ReserveSlide(ctx, "k", ratelimit.Sliding{Limit: 5, Window: time.Second, Cost: 2}))
	sent(l.ReserveSlideUpTo(ctx, "k", ratelimit.Sliding{Limit: 5, Window: time.Second, Cost: 9}))
	limits := []ratelimit.Limit{{Key: "{a}1", Limit: 1, Window: 1500 * time.Millisecond}, {Key: "{a}2", Limit: 2, Calendar: ratelimit.Day}}
	sent(l.ReserveAll(ctx, limits, ratelimit.AllOptions{Cost: 2, Align: true, TZ: "+01:00", Tokens: 40, TokenKeys: 1}))
	sent(l.HitAll(ctx, limits[:1], ratelimit.AllOptions{Sliding: true}))
	rate := ratelimit.Rate{MaxBurst: 1, PerPeriod: 2, Period: 500 * time.Millisecond, Tokens: 2}
	sent(l.GCRAUpTo(ctx, "g", ratelimit.Rate{MaxBurst: 1, PerPeriod: 2, Period: 500 * time.Millisecond, Tokens: 2, Align: true}))
	sent(l.ReserveGCRA(ctx, "g", rate))
	sent(l.Settle(ctx, ratelimit.Reservation{Key: "k", Token: "h:1:1:1:1:01234567"}, 3))
	sent(l.Acquire(ctx, "l", 2, 1500*time.Millisecond, "i"))
	sent(l.Release(ctx, "l", "i"))
	sent(l.Renew(ctx, "l", "i", 1500*time.Millisecond))
	sent(l.Top(ctx, ratelimit.TopOptions{View: "admitted", Count: 3, Reset: true}))
	sent(l.AdaptUpTo(ctx, "a", ratelimit.Adaptive{Floor: 1, Start: 2, Ceiling: 3, Window: 1500 * time.Millisecond, Cost: 2, Turn: true}))
	sent(l.ReserveAdapt(ctx, "a", ratelimit.Adaptive{Floor: 1, Start: 2, Ceiling: 3, Window: time.Minute, Cost: 2}))
	sent(l.ReserveAdaptUpTo(ctx, "a", ratelimit.Adaptive{Floor: 1, Start: 2, Ceiling: 3, Window: time.Minute, Cost: 9}))
	bound := &ratelimit.Bound{Remaining: 2, ResetAfter: time.Second}
	sent(l.Report(ctx, "a", ratelimit.Report{Throttled: true, RetryAfter: time.Second, Limit: 5, Bound: bound, Age: 4 * time.Millisecond}))
	return conn.sent
}

type argument struct {
	name, typ, token string
	children         []argument
}

func readArgument(v any) argument {
	f := resp.Fields(v)
	a := argument{}
	a.name, _ = f["name"].(string)
	a.typ, _ = f["type"].(string)
	a.token, _ = f["token"].(string)
	nested, _ := f["arguments"].([]any)
	for _, n := range nested {
		a.children = append(a.children, readArgument(n))
	}
	return a
}

func walk(args []argument, visit func(argument)) {
	for _, a := range args {
		visit(a)
		walk(a.children, visit)
	}
}

// The Limiter's methods take every argument COMMAND DOCS lists, under the names above, and send
// only the tokens it documents: a new option in the module, or a renamed one, fails here.
func TestCallsMatchCommandDocs(t *testing.T) {
	server := start(t, "module", options{})
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr(), Protocol: 2})
	defer rdb.Close()
	sent := everyOption(t, rdb)
	for command, where := range taken {
		reply, err := rdb.Do(context.Background(), "COMMAND", "DOCS", command).Result()
		if err != nil {
			t.Fatal(err)
		}
		var documented []argument
		for _, a := range resp.Fields(resp.Fields(reply)[command])["arguments"].([]any) {
			documented = append(documented, readArgument(a))
		}
		names, tokens := map[string]bool{}, map[string]bool{}
		walk(documented, func(a argument) {
			if a.typ != "block" && a.typ != "oneof" {
				names[a.name] = true
			}
			if a.token != "" {
				tokens[strings.ToUpper(a.token)] = true
			}
		})
		for name := range names {
			place, ok := where[name]
			if !ok {
				t.Errorf("%s: %s is documented, and taken nowhere", command, name)
				continue
			}
			if typ, field, ok := strings.Cut(place, "."); ok {
				if _, has := types[typ].FieldByName(field); !has {
					t.Errorf("%s: %s has no field %s", command, typ, field)
				}
			}
		}
		for name := range where {
			if !names[name] {
				t.Errorf("%s: %s is not in COMMAND DOCS", command, name)
			}
		}
		var undocumented []string
		for _, args := range sent[command] {
			for _, word := range args[1:] {
				if word == strings.ToUpper(word) && strings.Trim(word, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" && !tokens[word] {
					undocumented = append(undocumented, word)
				}
			}
		}
		sort.Strings(undocumented)
		if len(undocumented) > 0 || len(sent[command]) == 0 {
			t.Errorf("%s: sends %v, not in COMMAND DOCS (or no method sends it)", command, undocumented)
		}
	}
}

// The embedded library is functions/ratelimit.lua, byte for byte.
func TestEmbeddedLibraryIsTheRepositorys(t *testing.T) {
	if text, err := readFile("../../../functions/ratelimit.lua"); err != nil || text != ratelimit.LibrarySource() {
		t.Fatalf("clients/go/ratelimit.lua differs from functions/ratelimit.lua (cp it): %v", err)
	}
}
