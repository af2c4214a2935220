package tests

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlrueidis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// ownClient is a rueidis client of its own (its own connections, as a process's) on addr, closed
// with the test, and a limiter over it.
func ownClient(t *testing.T, addr string) (rueidis.Client, *ratelimit.Limiter) {
	t.Helper()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client, rlrueidis.New(client)
}

// hotRun is what a fleet's processes asked and admitted in each window of the hot limit (ALIGNed
// windows of the server, whose clock is this machine's): an admission is certain in a window when
// its Take began and returned in it, else it is counted apart (it may belong to either).
type hotRun struct {
	asked, admitted map[int64]int64
	straddling      map[int64]int64
	straddled       int64
}

// runHot has `processes` limiters (each its own client and connections) share limit per window on
// key, each Take of 1 paced to `rate` a second in all, for `d`; then each process closes its share.
func runHot(t *testing.T, addr, key string, limit int64, window time.Duration, rate float64, d time.Duration) hotRun {
	t.Helper()
	const processes, takers = 8, 2
	run := hotRun{asked: map[int64]int64{}, admitted: map[int64]int64{}, straddling: map[int64]int64{}}
	var mu sync.Mutex
	windowOf := func(t time.Time) int64 { return t.UnixNano() / int64(window) }
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for p := 0; p < processes; p++ {
		_, l := ownClient(t, addr)
		hot := l.Hot(key, ratelimit.Fixed{Limit: limit, Window: window, Align: true}, ratelimit.HotOptions{})
		var mine sync.WaitGroup
		for g := 0; g < takers; g++ {
			mine.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer mine.Done()
				interval := time.Duration(float64(time.Second) * processes * takers / rate)
				for next := time.Now(); ; next = next.Add(interval) {
					if wait := time.Until(next); wait > 0 {
						time.Sleep(wait)
					}
					before := time.Now()
					if before.After(stop) {
						return
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					ok, err := hot.Take(ctx, 1)
					cancel()
					after := time.Now()
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					run.asked[windowOf(before)]++
					switch {
					case !ok:
					case windowOf(before) == windowOf(after):
						run.admitted[windowOf(before)]++
					default:
						run.straddling[windowOf(before)]++
						run.straddling[windowOf(after)]++
						run.straddled++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine.Wait()
			if err := hot.Close(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	return run
}

// TestHotLimitOnAServer: processes on loopback share one limit through hot limits, on the module
// and on the library. Never over: in no window do the admissions certainly in it pass the limit.
// Demand at 2x: each whole window where the processes asked 1.2x the limit or more admits 99% of
// it or more. Demand at 0.5x: every Take admitted (only the server's "none left" denies one).
func TestHotLimitOnAServer(t *testing.T) {
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			server := start(t, kind, options{})
			const limit, window = 4000, time.Second
			over := runHot(t, server.Addr(), "hot:over", limit, window, 2*limit, 3500*time.Millisecond)
			windows := sortedWindows(over)
			checked := 0
			for _, w := range windows {
				if over.admitted[w] > limit {
					t.Errorf("window %d: %d admitted, over the limit %d", w, over.admitted[w], limit)
				}
				whole := w > windows[0] && over.asked[w-1] > 0 && over.asked[w+1] > 0
				if whole && float64(over.asked[w]) >= 1.2*limit {
					checked++
					if got := over.admitted[w] + over.straddling[w]; float64(got) < 0.99*limit {
						t.Errorf("window %d: %d admitted of %d (asked %d)", w, got, limit, over.asked[w])
					}
				}
			}
			t.Logf("2x the limit: %s (%d whole windows checked)", summary(over), checked)

			under := runHot(t, server.Addr(), "hot:under", limit, window, 0.5*limit, 2500*time.Millisecond)
			// Closed, the processes gave back what they held: the running window counts what was
			// admitted in it (read while it still runs).
			last := sortedWindows(under)[len(under.asked)-1]
			rdb := redis.NewClient(&redis.Options{Addr: server.Addr()})
			defer rdb.Close()
			count, err := rdb.Get(context.Background(), "hot:under").Int64()
			if time.Now().UnixNano()/int64(window) == last {
				// (a Take straddling two windows may be either's)
				if err != nil || count < under.admitted[last] || count > under.admitted[last]+under.straddling[last] {
					t.Errorf("after Close the window counts %d (%v), and %d to %d were admitted in it", count, err,
						under.admitted[last], under.admitted[last]+under.straddling[last])
				} else {
					t.Logf("after Close the window counts %d, as many as were admitted in it", count)
				}
			}
			asked, admitted := int64(0), under.straddled
			for w, n := range under.asked {
				asked += n
				admitted += under.admitted[w]
			}
			t.Logf("0.5x the limit: %s", summary(under))
			if admitted != asked {
				t.Errorf("0.5x the limit: %d of %d Takes admitted", admitted, asked)
			}
		})
	}
}

func sortedWindows(r hotRun) []int64 {
	windows := make([]int64, 0, len(r.asked))
	for w := range r.asked {
		windows = append(windows, w)
	}
	slices.Sort(windows)
	return windows
}

func summary(r hotRun) string {
	text := ""
	for _, w := range sortedWindows(r) {
		text += fmt.Sprintf(" [window %d: asked %d, admitted %d, straddling %d]", w%1000, r.asked[w], r.admitted[w], r.straddling[w])
	}
	return text
}

// TestHotLimitRedisDown: with Redis gone, the tokens held stay usable until their deadline; a
// process that holds none gets the error, and admits with FailOpen.
func TestHotLimitRedisDown(t *testing.T) {
	server := start(t, "module", options{})
	_, l := ownClient(t, server.Addr())
	f := ratelimit.Fixed{Limit: 1000, Window: time.Minute}
	held, closed, open := l.Hot("hot:d", f, ratelimit.HotOptions{}), l.Hot("hot:c", f, ratelimit.HotOptions{}),
		l.Hot("hot:o", f, ratelimit.HotOptions{FailOpen: true})
	ctx := context.Background()
	for range 20 { // a demand to measure (over 10 ms), then a block ahead of it
		if ok, err := held.Take(ctx, 1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	server.Stop()
	if ok, err := held.Take(ctx, 1); !ok || err != nil {
		t.Fatalf("with a block held: %v %v", ok, err)
	}
	if ok, err := closed.Take(ctx, 1); ok || err == nil {
		t.Fatalf("none held, closed: %v %v", ok, err)
	}
	if ok, err := open.Take(ctx, 1); !ok || err == nil {
		t.Fatalf("none held, FailOpen: %v %v", ok, err)
	}
}

// TestHotLimitRefusals: a limit HIT would refuse is refused at every Take, and a call the server
// refuses (a key of another type) is denied even with FailOpen: open is for Redis unreachable.
func TestHotLimitRefusals(t *testing.T) {
	server := start(t, "module", options{})
	client, l := ownClient(t, server.Addr())
	ctx := context.Background()
	bad := l.Hot("hot:bad", ratelimit.Fixed{Limit: 0, Window: time.Minute}, ratelimit.HotOptions{FailOpen: true})
	if ok, err := bad.Take(ctx, 1); ok || !errors.Is(err, ratelimit.ErrInvalidArgument) {
		t.Fatalf("a limit of 0: %v %v", ok, err)
	}
	if err := client.Do(ctx, client.B().Rpush().Key("hot:list").Element("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	list := l.Hot("hot:list", ratelimit.Fixed{Limit: 10, Window: time.Minute}, ratelimit.HotOptions{FailOpen: true})
	var refused *ratelimit.ServerError
	if ok, err := list.Take(ctx, 1); ok || !errors.As(err, &refused) {
		t.Fatalf("a list's key, FailOpen: %v %v", ok, err)
	}
}
