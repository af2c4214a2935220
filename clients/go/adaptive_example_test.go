package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// An adaptive limit the fleet learns: a 429 with a Retry-After seen by any process cuts it once
// and holds every caller.
func ExampleAdaptiveLimit() {
	ctx := context.Background()
	limit := &ratelimit.AdaptiveLimit{Limiter: newLimiter(), Key: "llm:{gemini}",
		Terms: ratelimit.Adaptive{Floor: 6, Start: 60, Ceiling: 600, Window: time.Minute}}
	d, _ := limit.Decide(ctx, 1)
	fmt.Println(d.Allowed, d.Limit)
	answer := ratelimit.ReadAnswer(http.StatusTooManyRequests, http.Header{"Retry-After": {"20"}}, time.Now())
	learned, _ := limit.Answered(ctx, answer)
	fmt.Println(learned.Limit, learned.Decreased, learned.Hold)
	d, _ = limit.Decide(ctx, 1)
	fmt.Println(d.Allowed, d.Limit)
	// Output:
	// true 60
	// 42 true 20s
	// false 42
}

// An LLM call's tokens are an estimate until its answer: reserved, then settled with its usage.
func ExampleAdaptiveLimit_Reserve() {
	ctx := context.Background()
	limit := &ratelimit.AdaptiveLimit{Limiter: newLimiter(), Key: "tpm:{gemini}", Tokens: true,
		Terms: ratelimit.Adaptive{Floor: 600, Start: 6000, Ceiling: 60000, Window: time.Minute}}
	r, _ := limit.Reserve(ctx, 1000)
	fmt.Println(r.Allowed, r.Amount, r.Remaining)
	s, _ := limit.Settle(ctx, r, 300) // the answer's usage
	fmt.Println(s.Applied, s.Limit, s.Remaining >= 700)
	// Output:
	// true 1000 0
	// -700 6000 true
}

// Do waits for the fleet's turn, sends, and reports the answer: here a provider with room for
// two calls, then 429s with a Retry-After of a second.
func ExampleAdaptiveLimit_Do() {
	calls := 0
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls++
		w.Header().Set("x-ratelimit-limit-requests", "100")
		if calls > 2 {
			w.Header().Set("retry-after", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer provider.Close()
	limit := &ratelimit.AdaptiveLimit{Limiter: newLimiter(), Key: "llm:{wrapped}",
		Terms: ratelimit.Adaptive{Floor: 1, Start: 600, Ceiling: 1000, Window: time.Minute}}
	send := func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, provider.URL, nil)
		return http.DefaultClient.Do(req)
	}
	for i := 0; i < 3; i++ {
		res, err := limit.Do(context.Background(), 1, false, send)
		if err == nil {
			res.Body.Close()
			fmt.Println(res.StatusCode)
		}
	}
	// The 429 cut the limit (capped at the stated 100, then 70) and held the fleet for a second.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := limit.Do(ctx, 1, false, send)
	fmt.Println(errors.Is(err, ratelimit.ErrRateLimited))
	d, _ := limit.Decide(context.Background(), 1)
	fmt.Println(d.Allowed, d.Limit)
	// Output:
	// 200
	// 200
	// 429
	// true
	// false 70
}
