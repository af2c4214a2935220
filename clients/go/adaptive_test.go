package ratelimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// Do asks again at the turn a denial told it with TURN, and reports each answer with its call's
// age (AGE): the server's slow log keeps the words of every command.
func TestDoAsksAgainAtItsTurn(t *testing.T) {
	ctx := context.Background()
	provider := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer provider.Close()
	send := func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, provider.URL, nil)
		return http.DefaultClient.Do(req)
	}
	// A token a second, a bucket of one: the second call is denied and waits its turn.
	limit := &ratelimit.AdaptiveLimit{Limiter: newLimiter(), Key: "llm:{turns}",
		Terms: ratelimit.Adaptive{Floor: 6, Start: 6, Ceiling: 6, Window: 6 * time.Second}}
	admin, err := dial(server)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.conn.Close()
	for _, command := range [][]string{{"CONFIG", "SET", "slowlog-log-slower-than", "0"}, {"SLOWLOG", "RESET"}} {
		if _, err := admin.Do(ctx, 0, command); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _, _ = admin.Do(ctx, 0, []string{"CONFIG", "SET", "slowlog-log-slower-than", "10000"}) }()
	for i := 0; i < 2; i++ {
		res, err := limit.Do(ctx, 1, false, send)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	logged, err := admin.Do(ctx, 0, []string{"SLOWLOG", "GET", "128"})
	if err != nil {
		t.Fatal(err)
	}
	var asked, reported []string
	entries, _ := logged.([]any)
	for i := len(entries) - 1; i >= 0; i-- {
		entry, _ := entries[i].([]any)
		var words []string
		if len(entry) > 3 {
			args, _ := entry[3].([]any)
			for _, a := range args {
				w, _ := a.(string)
				words = append(words, w)
			}
		}
		c := strings.Join(words, " ")
		switch {
		case strings.HasPrefix(c, "RATELIMIT.ADAPT") || strings.HasPrefix(c, "FCALL ratelimit_adapt"):
			asked = append(asked, c)
		case strings.HasPrefix(c, "RATELIMIT.REPORT") || strings.HasPrefix(c, "FCALL ratelimit_report"):
			reported = append(reported, c)
		}
	}
	// Admitted, denied, then admitted at its turn.
	if len(asked) < 3 || strings.HasSuffix(asked[1], " TURN") || !strings.HasSuffix(asked[len(asked)-1], " TURN") {
		t.Fatalf("the ADAPT calls sent: %q", asked)
	}
	age := regexp.MustCompile(` AGE [1-9][0-9]*$`)
	if len(reported) != 2 || !age.MatchString(reported[0]) || !age.MatchString(reported[1]) {
		t.Fatalf("the REPORT calls sent: %q", reported)
	}
}
