package tests

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	upstream "github.com/go-redis/redis_rate/v10"
	ours "github.com/redis-ratelimit/redis-ratelimit/clients/go/redis_rate"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlgoredis"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/tests/wrappers"
	"github.com/redis/go-redis/v9"
)

// aLimit is a random limit whose emission interval is a whole number of eighths of a second
// over a power of two: with the clock on eighths of a second too, every sum redis_rate's Lua
// makes in floating point is exact, so both sides decide on the same numbers. (Elsewhere its
// floating point may answer a token fewer where the count is a whole number: a fresh 4 per
// 1.631939067 s, burst 5, answered Remaining 3 after one call at 1800000003504 ms; this package 4.)
func aLimit(rng *rand.Rand) upstream.Limit {
	return upstream.Limit{
		Rate:   1 << rng.IntN(4),
		Burst:  1 + rng.IntN(8),
		Period: time.Duration(1+rng.IntN(24)) * eighth,
	}
}

const eighth = 125 * time.Millisecond

func within(a, b, slack time.Duration) bool {
	d := a - b
	return d <= slack && -d <= slack
}

// The same random calls to redis_rate v10 itself and to this package, on one server whose clock
// the test stands, give the same Allowed and Remaining, and RetryAfter and ResetAfter within 1 ms.
// Each sequence takes its client in turn: a *redis.Client, a type that embeds one, and (where the
// server has the module) a wrapper with only the methods redis_rate's NewLimiter asks for, which
// both constructors take alike.
func TestRedisRateDropInAnswersAsRedisRate(t *testing.T) {
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			now := int64(1_800_000_000_000) // Unix ms, 2027
			clock := newClock(t, now)
			server := start(t, kind, options{clock: clock.file})
			rdb := redis.NewClient(&redis.Options{Addr: server.Addr()})
			defer rdb.Close()
			for i := 0; i < 3; i++ {
				if at, err := rdb.Time(ctx).Result(); err != nil || at.UnixMicro() != now*1000 {
					t.Skipf("this server adds microseconds of its own to a stood clock (%v, %v; Valkey 9 does): "+
						"the two sides would not decide at one instant", at, err)
				}
			}
			wrapper := wrappers.NewScriptsOnly(rdb)
			type pair struct {
				theirs *upstream.Limiter
				mine   *ours.Limiter
			}
			clients := []pair{
				{upstream.NewLimiter(rdb), ours.NewLimiter(rdb)},
				{upstream.NewLimiter(wrappers.Embedding{Client: rdb}), ours.NewLimiter(wrappers.Embedding{Client: rdb})},
			}
			if kind == "module" {
				clients = append(clients, pair{upstream.NewLimiter(wrappers.NewScriptsOnly(rdb)), ours.NewLimiter(wrapper)})
			} else {
				_, err := ours.NewLimiter(wrapper).Allow(ctx, "k", ours.PerSecond(1))
				if !errors.Is(err, rlgoredis.ErrScriptsOnly) {
					t.Fatalf("a client of scripts only on a server without the module: %v", err)
				}
			}
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 7))
			compared, admitted, partial := 0, 0, 0
			for sequence := 0; sequence < 14; sequence++ {
				limit := aLimit(rng)
				key := "k" + strconv.Itoa(sequence)
				theirs, mine := clients[sequence%len(clients)].theirs, clients[sequence%len(clients)].mine
				emission := limit.Period / time.Duration(limit.Rate)
				for call := 0; call < 90; call++ {
					if rng.IntN(3) > 0 {
						now += int64(eighth/time.Millisecond) * rng.Int64N(int64(2*emission/eighth)+2)
					}
					clock.set(t, now, rdb)
					atMost := rng.IntN(3) == 0
					n := 1 + rng.IntN(limit.Burst+2)
					var want, got *upstream.Result
					var gotOurs *ours.Result
					var err1, err2 error
					if atMost {
						want, err1 = theirs.AllowAtMost(ctx, key, limit, n)
						gotOurs, err2 = mine.AllowAtMost(ctx, key, ours.Limit(limit), n)
					} else {
						want, err1 = theirs.AllowN(ctx, key, limit, n)
						gotOurs, err2 = mine.AllowN(ctx, key, ours.Limit(limit), n)
					}
					if err1 != nil || err2 != nil {
						t.Fatalf("seed %d: %v / %v", seed, err1, err2)
					}
					got = &upstream.Result{Limit: limit, Allowed: gotOurs.Allowed, Remaining: gotOurs.Remaining,
						RetryAfter: gotOurs.RetryAfter, ResetAfter: gotOurs.ResetAfter}
					same := want.Allowed == got.Allowed && want.Remaining == got.Remaining &&
						within(want.RetryAfter, got.RetryAfter, time.Millisecond) &&
						within(want.ResetAfter, got.ResetAfter, time.Millisecond)
					if !same {
						t.Fatalf("seed %d, %v, call %d (n %d, at most %v, at %d ms):\nredis_rate %+v\nthis       %+v",
							seed, limit, call, n, atMost, now, *want, *got)
					}
					compared++
					if got.Allowed > 0 {
						admitted++
					}
					if atMost && got.Allowed > 0 && got.Allowed < n {
						partial++
					}
				}
			}
			t.Logf("%s: %d calls compared (%d admitted, %d granted in part), seed %d", kind, compared, admitted, partial, seed)
			if kind == "module" && wrapper.Scripts.Load() < 90 {
				t.Fatalf("the wrapper's calls went elsewhere: %d scripts", wrapper.Scripts.Load())
			}
			if admitted < compared/5 || compared-admitted < compared/5 || partial < 10 {
				t.Fatalf("the calls exercised too little: %d admitted, %d granted in part of %d", admitted, partial, compared)
			}
		})
	}
}
