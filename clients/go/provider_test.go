package ratelimit_test

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// A provider's answer reads as every client reads it (testkit/conformance/provider_answers.json).
func TestProviderAnswersReadAsEveryClientReadsThem(t *testing.T) {
	raw, err := os.ReadFile("../../testkit/conformance/provider_answers.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name       string            `json:"name"`
		Status     *int              `json:"status"`
		Now        string            `json:"now"`
		Headers    map[string]string `json:"headers"`
		Throttled  bool              `json:"throttled"`
		RetryAfter *int64            `json:"retry_after_ms"`
		Requests   [3]*int64         `json:"requests"`
		Tokens     [3]*int64         `json:"tokens"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	orNone := func(v *int64) int64 {
		if v == nil {
			return -1
		}
		return *v
	}
	msOf := func(d time.Duration) int64 {
		if d < 0 {
			return -1
		}
		return d.Round(time.Millisecond).Milliseconds()
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			now, _ := time.Parse(time.RFC3339, "2026-12-01T12:00:00Z")
			if c.Now != "" {
				now, _ = time.Parse(time.RFC3339, c.Now)
			}
			header := http.Header{}
			for name, value := range c.Headers {
				header[name] = []string{value}
			}
			status := 0
			if c.Status != nil {
				status = *c.Status
			}
			a := ratelimit.ReadAnswer(status, header, now)
			wait := int64(-1)
			if a.RetryAfter > 0 {
				wait = msOf(a.RetryAfter)
			}
			if a.Throttled != c.Throttled || wait != orNone(c.RetryAfter) {
				t.Errorf("throttled %v, wait %d ms; want %v, %d", a.Throttled, wait, c.Throttled, orNone(c.RetryAfter))
			}
			for _, m := range []struct {
				got  ratelimit.Stated
				want [3]*int64
			}{{a.Requests, c.Requests}, {a.Tokens, c.Tokens}} {
				got := [3]int64{m.got.Limit, m.got.Remaining, msOf(m.got.ResetAfter)}
				want := [3]int64{orNone(m.want[0]), orNone(m.want[1]), orNone(m.want[2])}
				if got != want {
					t.Errorf("stated %v, want %v", got, want)
				}
			}
		})
	}
}
