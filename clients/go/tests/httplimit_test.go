package tests

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/httplimit"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlgoredis"
	"github.com/redis/go-redis/v9"
)

func get(t *testing.T, url string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// Every kind of rule through the middleware, on the standard mux and on chi, over HTTP.
func TestHTTPMiddlewareRules(t *testing.T) {
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			server := start(t, kind, options{})
			rdb := redis.NewClient(&redis.Options{Addr: server.Addr()})
			defer rdb.Close()
			rl := rlgoredis.New(rdb)
			release := make(chan struct{})
			entered := make(chan struct{}, 4)
			mw, err := httplimit.New(rl, httplimit.Options{
				Key: httplimit.Header("X-API-Key", httplimit.ClientIP),
				Rules: []httplimit.Rule{
					{Name: "fixed", Path: "/fixed", Fixed: &ratelimit.Fixed{Limit: 2, Window: time.Minute}},
					{Name: "sliding", Path: "/sliding", Sliding: &ratelimit.Sliding{Limit: 2, Window: time.Minute}},
					{Name: "writes", Path: "/gcra", Methods: []string{"GET"}, GCRA: &ratelimit.Rate{MaxBurst: 1, PerPeriod: 1, Period: time.Minute}},
					{Name: "both", Path: "/all/**", AllOf: []ratelimit.Limit{{Limit: 3, Window: time.Second}, {Limit: 2, Window: time.Hour}}},
					{Name: "slow", Path: "/slow", InFlight: &httplimit.InFlight{Limit: 1, Lease: 600 * time.Millisecond}},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/slow" {
					entered <- struct{}{}
					<-release
				}
				_, _ = w.Write([]byte("ok"))
			})
			mux := http.NewServeMux()
			mux.Handle("/", handler)
			router := chi.NewRouter()
			router.Use(mw)
			router.Handle("/*", handler)
			for name, base := range map[string]*httptest.Server{"mux": httptest.NewServer(mw(mux)), "chi": httptest.NewServer(router)} {
				defer base.Close()
				who := []string{"X-API-Key", name}
				for _, path := range []string{"/fixed", "/sliding", "/gcra", "/all/x/y"} {
					for i := 1; i <= 3; i++ {
						res := get(t, base.URL+path, who...)
						want := http.StatusOK
						if i == 3 {
							want = http.StatusTooManyRequests
						}
						if res.StatusCode != want || !strings.Contains(res.Header.Get("RateLimit-Policy"), "q=") || res.Header.Get("RateLimit") == "" {
							t.Fatalf("%s %s, request %d: %d %v", name, path, i, res.StatusCode, res.Header)
						}
						if i == 3 && res.Header.Get("Retry-After") == "" {
							t.Fatalf("%s %s: a 429 without Retry-After: %v", name, path, res.Header)
						}
					}
				}
				if res := get(t, base.URL+"/unlimited", who...); res.StatusCode != http.StatusOK || res.Header.Get("RateLimit") != "" {
					t.Fatalf("%s: a path no rule matches: %d %v", name, res.StatusCode, res.Header)
				}
				if res := get(t, base.URL+"/fixed", "X-API-Key", name+"-other"); res.StatusCode != http.StatusOK {
					t.Fatalf("%s: another identity: %d", name, res.StatusCode)
				}
				// In flight: one at a time, held past its lease (renewed), and given back after.
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { defer wg.Done(); get(t, base.URL+"/slow", who...) }()
				<-entered
				time.Sleep(800 * time.Millisecond) // past the lease: renewed meanwhile
				if res := get(t, base.URL+"/slow", who...); res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
					t.Fatalf("%s: a second request in flight: %d %v", name, res.StatusCode, res.Header)
				}
				release <- struct{}{}
				wg.Wait()
				go func() { <-entered; release <- struct{}{} }()
				if res := get(t, base.URL+"/slow", who...); res.StatusCode != http.StatusOK {
					t.Fatalf("%s: the permit was not given back: %d", name, res.StatusCode)
				}
			}
			if _, err := httplimit.New(rl, httplimit.Options{Rules: []httplimit.Rule{{}}}); err == nil {
				t.Fatal("a rule with no limiter was taken")
			}
			if _, err := httplimit.New(rl, httplimit.Options{Rules: []httplimit.Rule{{Fixed: &ratelimit.Fixed{Limit: 0, Window: time.Second}}}}); err == nil {
				t.Fatal("a limit of 0 was taken")
			}
		})
	}
}

// lockedLog is a log's text, written and read by several goroutines.
type lockedLog struct {
	mu   sync.Mutex
	text strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// A server that stops: requests are admitted (fail open) or refused with 503 (fail closed), and
// the outage is told once: to OnOutage, or else as one line to the Logger option.
func TestHTTPMiddlewareServerGone(t *testing.T) {
	server := start(t, "module", options{})
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	rl := rlgoredis.New(rdb)
	var outages []error
	var mu sync.Mutex
	told := func(err error) { mu.Lock(); outages = append(outages, err); mu.Unlock() }
	rules := []httplimit.Rule{{Fixed: &ratelimit.Fixed{Limit: 100, Window: time.Minute}}}
	open, err := httplimit.New(rl, httplimit.Options{Rules: rules, OnOutage: told})
	if err != nil {
		t.Fatal(err)
	}
	var logged lockedLog
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	closed, err := httplimit.New(rl, httplimit.Options{Rules: rules, FailClosed: true, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	openServer, closedServer := httptest.NewServer(open(ok)), httptest.NewServer(closed(ok))
	defer openServer.Close()
	defer closedServer.Close()
	if res := get(t, openServer.URL); res.StatusCode != http.StatusOK || res.Header.Get("RateLimit") == "" {
		t.Fatalf("before: %d %v", res.StatusCode, res.Header)
	}
	server.Stop()
	for i := 0; i < 3; i++ {
		if res := get(t, openServer.URL); res.StatusCode != http.StatusOK || res.Header.Get("RateLimit") != "" {
			t.Fatalf("fail open: %d %v", res.StatusCode, res.Header)
		}
		if res := get(t, closedServer.URL); res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" {
			t.Fatalf("fail closed: %d %v", res.StatusCode, res.Header)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(outages) != 1 || outages[0] == nil {
		t.Fatalf("the outage was told %d times: %v", len(outages), outages)
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "refusing requests") {
		t.Fatalf("the Logger got %q", logged.String())
	}
}
