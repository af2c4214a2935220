package tests

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlgoredis"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/tests/wrappers"
	ours "github.com/redis-ratelimit/redis-ratelimit/clients/go/ulule/redis"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	mfasthttp "github.com/ulule/limiter/v3/drivers/middleware/fasthttp"
	mgin "github.com/ulule/limiter/v3/drivers/middleware/gin"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	theirs "github.com/ulule/limiter/v3/drivers/store/redis"
	"github.com/valyala/fasthttp"
)

// The same calls to ulule's own Redis store and to this one count alike: the same Limit,
// Remaining and Reached, resets within a second, and the same counter under the same key. Over a
// *redis.Client, and (where the server has the module) a wrapper with only the methods ulule's
// constructor asks for, which both constructors take alike.
func TestUluleStoreCountsAsUlulesRedisStore(t *testing.T) {
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			server := start(t, kind, options{})
			rdb := redis.NewClient(&redis.Options{Addr: server.Addr()})
			defer rdb.Close()
			ululeCountsAlike(t, rdb, rdb)
			wrapper := wrappers.NewScriptsOnly(rdb)
			if kind == "library" {
				_, err := ours.NewStore(wrapper)
				if !errors.Is(err, rlgoredis.ErrScriptsOnly) {
					t.Fatalf("a client of scripts only on a server without the module: %v", err)
				}
				return
			}
			rdb.FlushAll(ctx)
			ululeCountsAlike(t, rdb, wrapper)
			if wrapper.Scripts.Load() < 10 {
				t.Fatalf("the wrapper's calls went elsewhere: %d scripts", wrapper.Scripts.Load())
			}
		})
	}
}

// ululeCountsAlike runs the same steps on both stores over client, and reads the counters with rdb.
func ululeCountsAlike(t *testing.T, rdb *redis.Client, client theirs.Client) {
	t.Helper()
	ctx := context.Background()
	theirStore, err := theirs.NewStoreWithOptions(client, limiter.StoreOptions{Prefix: "theirs"})
	if err != nil {
		t.Fatal(err)
	}
	ourStore, err := ours.NewStoreWithOptions(client, limiter.StoreOptions{Prefix: "ours"})
	if err != nil {
		t.Fatal(err)
	}
	rate := limiter.Rate{Period: 30 * time.Second, Limit: 5}
	steps := []struct {
		op    string
		count int64
	}{{"get", 1}, {"get", 1}, {"peek", 0}, {"incr", 3}, {"get", 1}, {"get", 1}, {"incr", 4}, {"peek", 0},
		{"incr", -2}, {"get", 1}, {"reset", 0}, {"peek", 0}, {"get", 1}, {"incr", 9}}
	for i, step := range steps {
		var want, got limiter.Context
		var err1, err2 error
		switch step.op {
		case "get":
			want, err1 = theirStore.Get(ctx, "u", rate)
			got, err2 = ourStore.Get(ctx, "u", rate)
		case "incr":
			want, err1 = theirStore.Increment(ctx, "u", step.count, rate)
			got, err2 = ourStore.Increment(ctx, "u", step.count, rate)
		case "peek":
			want, err1 = theirStore.Peek(ctx, "u", rate)
			got, err2 = ourStore.Peek(ctx, "u", rate)
		case "reset":
			want, err1 = theirStore.Reset(ctx, "u", rate)
			got, err2 = ourStore.Reset(ctx, "u", rate)
		}
		if err1 != nil || err2 != nil {
			t.Fatalf("step %d: %v / %v", i, err1, err2)
		}
		reset := want.Reset - got.Reset
		if want.Limit != got.Limit || want.Remaining != got.Remaining || want.Reached != got.Reached || reset < -1 || reset > 1 {
			t.Fatalf("step %d (%s %d): ulule %+v, this %+v", i, step.op, step.count, want, got)
		}
		theirCount, _ := rdb.Get(ctx, "theirs:u").Result()
		ourCount, _ := rdb.Get(ctx, "ours:u").Result()
		if theirCount != ourCount {
			t.Fatalf("step %d: counters %q and %q", i, theirCount, ourCount)
		}
	}
	if ttl := rdb.PTTL(ctx, "ours:u").Val(); ttl <= 0 || ttl > rate.Period {
		t.Fatalf("the counter's TTL: %v", ttl)
	}
}

// ulule's own net/http, gin and fasthttp middlewares, unchanged, on this store over HTTP.
func TestUluleMiddlewaresRunOnTheStore(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			server := start(t, kind, options{})
			rdb := redis.NewClient(&redis.Options{Addr: server.Addr()})
			defer rdb.Close()
			store, err := ours.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "mw:" + string(kind)})
			if err != nil {
				t.Fatal(err)
			}
			ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
			newLimiter := func() *limiter.Limiter { return limiter.New(store, limiter.Rate{Period: time.Minute, Limit: 3}) }

			std := httptest.NewServer(stdlib.NewMiddleware(newLimiter(), stdlib.WithKeyGetter(func(*http.Request) string { return "std" })).Handler(ok))
			defer std.Close()

			engine := gin.New()
			engine.Use(mgin.NewMiddleware(newLimiter(), mgin.WithKeyGetter(func(*gin.Context) string { return "gin" })))
			engine.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
			withGin := httptest.NewServer(engine)
			defer withGin.Close()

			listener, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			fast := mfasthttp.NewMiddleware(newLimiter(), mfasthttp.WithKeyGetter(func(*fasthttp.RequestCtx) string { return "fast" }))
			fastServer := &fasthttp.Server{Handler: fast.Handle(func(c *fasthttp.RequestCtx) { c.SetBodyString("ok") })}
			go func() { _ = fastServer.Serve(listener) }()
			defer func() { _ = fastServer.Shutdown() }()

			for name, url := range map[string]string{"net/http": std.URL, "gin": withGin.URL, "fasthttp": "http://" + listener.Addr().String()} {
				for i := 1; i <= 4; i++ {
					res, err := http.Get(url + "/")
					if err != nil {
						t.Fatal(err)
					}
					res.Body.Close()
					remaining := strconv.Itoa(max(3-i, 0))
					reset, _ := strconv.ParseInt(res.Header.Get("X-RateLimit-Reset"), 10, 64)
					wantStatus := http.StatusOK
					if i == 4 {
						wantStatus = http.StatusTooManyRequests
					}
					if res.StatusCode != wantStatus || res.Header.Get("X-RateLimit-Limit") != "3" ||
						res.Header.Get("X-RateLimit-Remaining") != remaining || reset < time.Now().Unix() || reset > time.Now().Add(time.Minute+time.Second).Unix() {
						t.Fatalf("%s, request %d: %d %v", name, i, res.StatusCode, res.Header)
					}
				}
			}
		})
	}
}
