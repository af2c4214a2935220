package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// A Limiter over an adapter's Conn decides on the server: here 3 calls a minute for one user.
func Example() {
	ctx := context.Background()
	l := newLimiter() // rlgoredis.New(redis.NewClient(&redis.Options{Addr: "localhost:6380"}))
	for i := 0; i < 4; i++ {
		d, err := l.Hit(ctx, "rl:user:42", ratelimit.Fixed{Limit: 3, Window: time.Minute})
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 2
	// true 1
	// true 0
	// false 0
}

// A fixed window: the first call starts it, and its expiry is set in the same step.
func ExampleLimiter_Hit() {
	ctx := context.Background()
	l := newLimiter()
	d, err := l.Hit(ctx, "rl:api:key-1", ratelimit.Fixed{Limit: 100, Window: time.Minute, Cost: 10})
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Allowed, d.Count, d.Remaining, d.ResetAfter)
	// Output: true 10 90 1m0s
}

// A sliding window weighs the previous window by its overlap with the current one.
func ExampleLimiter_Slide() {
	ctx := context.Background()
	l := newLimiter()
	window := ratelimit.Sliding{Limit: 2, Window: time.Minute}
	for i := 0; i < 3; i++ {
		d, err := l.Slide(ctx, "rl:login:ip-1", window)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter > 0)
	}
	// Output:
	// true 1 false
	// true 0 false
	// false 0 true
}

// GCRA: a burst of MaxBurst + 1, then PerPeriod tokens every Period, evenly (here one a minute).
func ExampleLimiter_GCRA() {
	ctx := context.Background()
	l := newLimiter()
	rate := ratelimit.Rate{MaxBurst: 1, PerPeriod: 60, Period: time.Hour}
	for i := 0; i < 3; i++ {
		d, err := l.GCRA(ctx, "rl:send:user-7", rate)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Remaining, d.Limit)
	}
	// Output:
	// true 1 2
	// true 0 2
	// false 0 2
}

// Several limits decided together: counted on all of them, or on none.
func ExampleLimiter_HitAll() {
	ctx := context.Background()
	l := newLimiter()
	limits := []ratelimit.Limit{
		{Key: "rl:{user:42}:minute", Limit: 2, Window: time.Minute},
		{Key: "rl:{user:42}:hour", Limit: 1000, Window: time.Hour},
	}
	for i := 0; i < 3; i++ {
		m, err := l.HitAll(ctx, limits, ratelimit.AllOptions{})
		if err != nil {
			panic(err)
		}
		fmt.Println(m.Allowed, m.Decisions[0].Remaining, m.Decisions[1].Remaining)
	}
	// Output:
	// true 1 999
	// true 0 998
	// false 0 998
}

// Reserve an estimate, then settle with what was used: the unused part is given back.
func ExampleLimiter_ReserveHit() {
	ctx := context.Background()
	l := newLimiter()
	tokens := ratelimit.Fixed{Limit: 10_000, Window: time.Minute, Cost: 2_000}
	r, err := l.ReserveHit(ctx, "rl:llm:team-a", tokens)
	if err != nil || !r.Allowed {
		panic(fmt.Sprint(r, err))
	}
	fmt.Println(r.Remaining)
	s, err := l.Settle(ctx, r, 1_200) // the answer used 1,200 tokens
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Applied, s.Remaining)
	// Output:
	// 8000
	// -800 8800
}

// A permit held while work runs: renewed every third of its lease, released when the work ends.
func ExampleLimiter_WithPermit() {
	ctx := context.Background()
	l := newLimiter()
	err := l.WithPermit(ctx, "rl:export:tenant-1", 1, 10*time.Second, func(ctx context.Context) error {
		// The one permit is taken: a second caller is refused at once.
		err := l.WithPermit(ctx, "rl:export:tenant-1", 1, 10*time.Second, func(context.Context) error { return nil })
		fmt.Println(errors.Is(err, ratelimit.ErrPermitUnavailable))
		return nil
	})
	fmt.Println(err)
	a, err := l.Acquire(ctx, "rl:export:tenant-1", 1, 10*time.Second, "")
	if err != nil {
		panic(err)
	}
	fmt.Println(a.Acquired)
	// Output:
	// true
	// <nil>
	// true
}

// A limit read from a configuration is checked when it is read, before any call.
func ExampleFixed_Validate() {
	fmt.Println(ratelimit.Fixed{Limit: 0, Window: time.Minute}.Validate())
	fmt.Println(ratelimit.Fixed{Limit: 5, Calendar: ratelimit.Month, TZ: "Europe/Paris"}.Validate())
	// Output:
	// ratelimit: limit must be an integer >= 1
	// <nil>
}
