package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlgoredis"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlrueidis"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlvalkey"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"
)

// clients are the limiters over every supported client, on one server or on a cluster of addrs,
// each made with options.
func clients(t *testing.T, addrs []string, cluster bool, options ...ratelimit.Option) map[string]*ratelimit.Limiter {
	t.Helper()
	limiters := map[string]*ratelimit.Limiter{}
	if cluster {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		t.Cleanup(func() { cc.Close() })
		limiters["go-redis ClusterClient"] = rlgoredis.New(cc, options...)
		u := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, IsClusterMode: true})
		t.Cleanup(func() { u.Close() })
		limiters["go-redis UniversalClient"] = rlgoredis.New(u, options...)
	} else {
		c := redis.NewClient(&redis.Options{Addr: addrs[0]})
		t.Cleanup(func() { c.Close() })
		limiters["go-redis Client"] = rlgoredis.New(c, options...)
		ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": addrs[0]}})
		t.Cleanup(func() { ring.Close() })
		limiters["go-redis Ring"] = rlgoredis.New(ring, options...)
	}
	r, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	limiters["rueidis"] = rlrueidis.New(r, options...)
	v, err := valkey.NewClient(valkey.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	limiters["valkey-go"] = rlvalkey.New(v, options...)
	return limiters
}

// Every command through every client, on the module and on the library, standalone and in a
// two-node cluster where no call may be redirected.
func TestEveryCommandThroughEveryClient(t *testing.T) {
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			one := start(t, kind, options{})
			nodes := startCluster(t, kind)
			addrs := []string{nodes[0].Addr(), nodes[1].Addr()}
			// The clients side by side (each on keys of its own), the cluster checked after all.
			t.Run("clients", func(t *testing.T) {
				for name, l := range clients(t, []string{one.Addr()}, false) {
					t.Run(name, func(t *testing.T) { t.Parallel(); everyCommand(t, l, kind) })
				}
				for name, l := range clients(t, addrs, true) {
					t.Run(name+" cluster", func(t *testing.T) { t.Parallel(); everyCommand(t, l, kind) })
				}
			})
			for _, node := range nodes {
				rdb := redis.NewClient(&redis.Options{Addr: node.Addr()})
				stats, err := rdb.Info(context.Background(), "errorstats").Result()
				rdb.Close()
				if err != nil || strings.Contains(stats, "MOVED") || strings.Contains(stats, "ASK") {
					t.Errorf("a call was redirected on %s: %v %s", node.Addr(), err, stats)
				}
			}
		})
	}
}

func everyCommand(t *testing.T, l *ratelimit.Limiter, kind Kind) {
	ctx := context.Background()
	tag := "{" + strings.ReplaceAll(t.Name(), "/", ":") + "}"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(ok bool, what string, got any) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %+v", what, got)
		}
	}
	backend, err := l.Backend(ctx)
	must(err)
	check(string(backend) == string(kind), "backend", backend)

	hit := ratelimit.Fixed{Limit: 2, Window: time.Minute}
	for i := 0; i < 2; i++ {
		d, err := l.Hit(ctx, tag+"h", hit)
		must(err)
		check(d.Allowed && d.Count == int64(i+1) && d.Window == time.Minute, "hit", d)
	}
	d, err := l.Hit(ctx, tag+"h", hit)
	must(err)
	check(!d.Allowed && d.RetryAfter > 59*time.Second && d.RetryAfter <= time.Minute, "hit denied", d)
	d, err = l.Peek(ctx, tag+"h", 2, 1)
	must(err)
	check(!d.Allowed && d.Count == 2, "peek", d)
	d, err = l.Hit(ctx, tag+"m", ratelimit.Fixed{Limit: 5, Calendar: ratelimit.Month, TZ: "+05:30", Cost: 2})
	must(err)
	check(d.Allowed && d.Count == 2 && d.ResetAfter > 0, "calendar hit", d)

	d, err = l.Slide(ctx, tag+"s", ratelimit.Sliding{Limit: 3, Window: 1500 * time.Millisecond, Cost: 2})
	must(err)
	check(d.Allowed && d.Count == 2 && d.Remaining == 1, "slide", d)
	d, err = l.SlidePeek(ctx, tag+"s", ratelimit.Sliding{Limit: 3, Window: 1500 * time.Millisecond, Cost: 2})
	must(err)
	check(!d.Allowed && d.Count == 2, "slide peek", d)

	rate := ratelimit.Rate{MaxBurst: 4, PerPeriod: 1, Period: time.Minute, Tokens: 3}
	d, err = l.GCRA(ctx, tag+"g", rate)
	must(err)
	check(d.Allowed && d.Limit == 5 && d.Remaining == 2, "gcra", d)
	g, err := l.GCRAUpTo(ctx, tag+"g", rate)
	must(err)
	check(g.Allowed && g.Granted == 2 && g.Remaining == 0, "gcra up to", g)
	g, err = l.GCRAUpTo(ctx, tag+"g", rate)
	must(err)
	check(!g.Allowed && g.Granted == 0 && g.RetryAfter > 59*time.Second, "gcra up to, empty", g)

	limits := []ratelimit.Limit{{Key: tag + "r", Limit: 10, Window: time.Minute}, {Key: tag + "t", Limit: 1000, Calendar: ratelimit.Day}}
	m, err := l.HitAll(ctx, limits, ratelimit.AllOptions{Tokens: 40, TokenKeys: 1})
	must(err)
	check(m.Allowed && m.Decisions[0].Count == 1 && m.Decisions[1].Count == 40, "hit all", m)
	mr, err := l.ReserveAll(ctx, limits, ratelimit.AllOptions{Tokens: 500})
	must(err)
	check(mr.Allowed && mr.Token != "" && len(mr.Keys) == 1, "reserve all", mr)
	settled, err := l.SettleAll(ctx, mr, 100)
	must(err)
	check(len(settled) == 1 && settled[0].Applied == -400 && settled[0].Count == 140, "settle all", settled)

	r, err := l.ReserveHit(ctx, tag+"rh", ratelimit.Fixed{Limit: 100, Window: time.Hour, Cost: 30})
	must(err)
	check(r.Allowed && r.Token != "" && r.Amount == 30, "reserve hit", r)
	s, err := l.Settle(ctx, r, 45)
	must(err)
	check(s.Applied == 15 && s.Count == 45, "settle", s)
	r, err = l.ReserveHitUpTo(ctx, tag+"rh", ratelimit.Fixed{Limit: 100, Window: time.Hour, Cost: 70})
	must(err)
	check(r.Allowed && r.Token != "" && r.Amount == 55 && r.Count == 100, "reserve hit up to", r)
	s, err = l.Settle(ctx, r, 50)
	must(err)
	check(s.Applied == -5 && s.Count == 95, "settle what was granted", s)
	r, err = l.ReserveHitUpTo(ctx, tag+"rh", ratelimit.Fixed{Limit: 95, Window: time.Hour, Cost: 70})
	must(err)
	check(!r.Allowed && r.Token == "" && r.Amount == 0 && r.RetryAfter > 59*time.Minute, "reserve hit up to, none left", r)
	_, err = l.ReserveHitUpTo(ctx, tag+"rh", ratelimit.Fixed{Limit: 95, Window: time.Hour, Cost: -1})
	check(errors.Is(err, ratelimit.ErrInvalidArgument), "up to a give-back", err)
	// Every limiter's five calls: decide, decide up to, reserve, reserve up to, give back.
	g, err = l.HitUpTo(ctx, tag+"uh", ratelimit.Fixed{Limit: 10, Window: time.Minute, Cost: 12})
	must(err)
	check(g.Granted == 10 && g.Allowed && g.Count == 10, "hit up to", g)
	d, err = l.RefundHit(ctx, tag+"uh", ratelimit.Fixed{Limit: 10, Window: time.Minute}, 4)
	must(err)
	check(d.Count == 6, "refund hit", d)
	g, err = l.SlideUpTo(ctx, tag+"us", ratelimit.Sliding{Limit: 10, Window: time.Minute, Cost: 12})
	must(err)
	check(g.Granted == 10 && g.Count == 10, "slide up to", g)
	d, err = l.RefundSlide(ctx, tag+"us", ratelimit.Sliding{Limit: 10, Window: time.Minute}, 3)
	must(err)
	check(d.Count == 7, "refund slide", d)
	bucket := ratelimit.Rate{MaxBurst: 2, PerPeriod: 1, Period: time.Minute, Tokens: 5}
	r, err = l.ReserveGCRAUpTo(ctx, tag+"ug", bucket)
	must(err)
	check(r.Allowed && r.Amount == 3 && r.Token != "", "reserve gcra up to", r)
	d, err = l.RefundGCRA(ctx, tag+"ug", bucket, 2)
	must(err)
	check(d.Remaining == 2, "refund gcra", d)
	_, err = l.RefundGCRA(ctx, tag+"ug", bucket, 0)
	check(errors.Is(err, ratelimit.ErrInvalidArgument), "a give-back of nothing", err)
	// A sliding window of 10^12 ms: the previous one weighs nothing, the estimate is the count.
	long := ratelimit.Sliding{Limit: 100, Window: 1e12 * time.Millisecond, Cost: 70}
	for _, want := range [][2]int64{{70, 70}, {30, 100}} { // granted, count
		r, err = l.ReserveSlideUpTo(ctx, tag+"rs", long)
		must(err)
		check(r.Allowed && r.Token != "" && r.Amount == want[0] && r.Count == want[1], "reserve slide up to", r)
	}
	s, err = l.Settle(ctx, r, 10)
	must(err)
	check(s.Applied == -20 && s.Count == 80, "settle a sliding window's grant", s)
	long.Limit = 80
	r, err = l.ReserveSlideUpTo(ctx, tag+"rs", long)
	must(err)
	check(!r.Allowed && r.Token == "" && r.Amount == 0 && r.RetryAfter > time.Hour, "reserve slide up to, no room", r)
	rs, err := l.ReserveGCRA(ctx, tag+"rg", ratelimit.Rate{MaxBurst: 9, PerPeriod: 1, Period: time.Second, Tokens: 5})
	must(err)
	s, err = l.Settle(ctx, rs, 2)
	must(err)
	check(s.Applied == -3 && s.Remaining == 8, "settle gcra", s)

	a, err := l.Acquire(ctx, tag+"p", 1, 30*time.Second, "")
	must(err)
	check(a.Acquired && a.ID != "" && a.Wait == 30*time.Second, "acquire", a)
	b, err := l.Acquire(ctx, tag+"p", 1, 30*time.Second, "")
	must(err)
	check(!b.Acquired && b.ID == "", "acquire denied", b)
	left, err := l.Renew(ctx, tag+"p", a.ID, 1500*time.Millisecond)
	must(err)
	check(left == 1500*time.Millisecond, "renew", left)
	released, err := l.Release(ctx, tag+"p", a.ID)
	must(err)
	check(released, "release", released)
	ran := false
	must(l.WithPermit(ctx, tag+"p", 1, time.Second, func(context.Context) error { ran = true; return nil }))
	check(ran, "with permit", ran)
	holding := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- l.WithPermit(ctx, tag+"p", 1, 600*time.Millisecond, func(context.Context) error {
			close(holding)
			time.Sleep(800 * time.Millisecond) // past the lease: renewed meanwhile
			return nil
		})
	}()
	<-holding
	err = l.WithPermit(ctx, tag+"p", 1, time.Second, func(context.Context) error { return nil })
	check(errors.Is(err, ratelimit.ErrPermitUnavailable), "a second permit", err)
	must(<-done)
	func() {
		defer func() { _ = recover() }()
		_ = l.WithPermit(ctx, tag+"p", 1, time.Second, func(context.Context) error { panic("the work failed") })
	}()
	after, err := l.Acquire(ctx, tag+"p", 1, time.Second, "")
	must(err)
	check(after.Acquired, "a permit given back when its work panicked", after)

	_, err = l.Hit(ctx, tag+"h", ratelimit.Fixed{Limit: 0, Window: time.Minute})
	var arg *ratelimit.ArgumentError
	check(errors.Is(err, ratelimit.ErrInvalidArgument) && errors.As(err, &arg), "limit 0", err)
	_, err = l.HitAll(ctx, []ratelimit.Limit{{Key: "a", Limit: 1, Window: time.Second}, {Key: "b", Limit: 1, Window: time.Second}}, ratelimit.AllOptions{})
	if l.Conn().Cluster() { // "a" and "b" are in slots 15495 and 3300
		check(errors.Is(err, ratelimit.ErrInvalidArgument), "cross slot", err)
	}
	// A sliding window of its own, for a minute: the one above (1.5 s) may be gone by now.
	_, err = l.Slide(ctx, tag+"w", ratelimit.Sliding{Limit: 3, Window: time.Minute})
	must(err)
	_, err = l.GCRA(ctx, tag+"w", rate)
	var server *ratelimit.ServerError
	check(errors.As(err, &server) && strings.Contains(server.Message, "not an integer"), "a sliding window read as a bucket", err)
	if kind == "module" {
		top, err := l.Top(ctx, ratelimit.TopOptions{View: "denied", Count: 3})
		must(err)
		check(top != nil, "top", top)
	} else {
		_, err := l.Top(ctx, ratelimit.TopOptions{})
		check(errors.Is(err, ratelimit.ErrInvalidArgument), "top on the library", err)
	}
}

// The library is loaded when missing, again after the server lost it, and not at all when told
// not to (ErrLibraryNotLoaded).
func TestLibraryLoadedWhenMissing(t *testing.T) {
	ctx := context.Background()
	server := start(t, "library", options{})
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr()})
	defer rdb.Close()
	_, err := rlgoredis.New(rdb, ratelimit.WithoutLibraryLoad()).Hit(ctx, "k", ratelimit.Fixed{Limit: 1, Window: time.Second})
	if !errors.Is(err, ratelimit.ErrLibraryNotLoaded) {
		t.Fatalf("without loading: %v", err)
	}
	rl := rlgoredis.New(rdb)
	for i := 0; i < 2; i++ {
		d, err := rl.Hit(ctx, "k", ratelimit.Fixed{Limit: 5, Window: time.Minute})
		if err != nil || d.Count != int64(i+1) {
			t.Fatalf("hit %d: %+v %v", i, d, err)
		}
		if err := rdb.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
