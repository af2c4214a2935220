// Command bench is `make bench`'s Go rows: this package's server CPU per decision against
// go-redis/redis_rate's Lua (GCRA) and ulule/limiter's Redis store (a fixed window, its Lua),
// on each server binary given; also over a client wrapper with only the methods their
// constructors ask for, which sends each command inside a script (shown, no target).
//
// Each decision is made through the library's own API (redis_rate's Limiter, ulule's Store) over
// go-redis, against the server, and the commands it sent are recorded (a go-redis hook); the
// recorded commands are then sent again, on a clean keyspace, in pipelines of 50, as many
// application processes would load a server, and that replay's server CPU (the server process's
// CPU clock) is the figure: one client waiting a round trip per decision would mostly measure the
// server waking for each. 50 identities at 100 a minute: most decisions past the first are
// denials, as under a flood. Repetitions interleave the contenders; medians. --quick is the smoke
// run `make test` makes so that this cannot rot.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unsafe"

	upstream "github.com/go-redis/redis_rate/v10"
	ours "github.com/redis-ratelimit/redis-ratelimit/clients/go/redis_rate"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/tests/servers"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/tests/wrappers"
	ourstore "github.com/redis-ratelimit/redis-ratelimit/clients/go/ulule/redis"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	theirstore "github.com/ulule/limiter/v3/drivers/store/redis"
)

const (
	identities = 50
	pipeline   = 50
	// target is the bound on this package's server CPU per decision, as a multiple of the peer's.
	target = 0.6
)

// cpuNS is the process's CPU time, from its CPU clock (every thread's).
func cpuNS(pid int) int64 {
	clock := int32((^pid)<<3 | 2) // the process's CPUCLOCK_SCHED clock
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(clock), uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(fmt.Sprintf("no CPU clock for process %d: %v", pid, errno))
	}
	return ts.Nano()
}

// recorder is a go-redis hook that keeps every command sent.
type recorder struct{ sent [][]any }

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.sent = append(r.sent, slices.Clone(cmd.Args()))
		return next(ctx, cmd)
	}
}
func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A contender: given a client, a decision for identity i. The first of a group is the peer;
// held says whether the target holds for it (the others are shown).
type contender struct {
	label string
	held  bool
	make  func(rdb *redis.Client) (func(ctx context.Context, i int) error, error)
}

var gcra = []contender{
	{"redis_rate v10 (Lua)", false, func(rdb *redis.Client) (func(context.Context, int) error, error) {
		l := upstream.NewLimiter(rdb)
		return func(ctx context.Context, i int) error {
			_, err := l.Allow(ctx, fmt.Sprint("user:", i), upstream.PerMinute(100))
			return err
		}, nil
	}},
	{"this redis_rate", true, func(rdb *redis.Client) (func(context.Context, int) error, error) {
		return allow(ours.NewLimiter(rdb)), nil
	}},
	// A client wrapper with only redis_rate's methods: RATELIMIT.GCRA inside a script.
	{"this redis_rate, a scripts-only wrapper (EVALSHA)", false, func(rdb *redis.Client) (func(context.Context, int) error, error) {
		return allow(ours.NewLimiter(wrappers.NewScriptsOnly(rdb))), nil
	}},
}

func allow(l *ours.Limiter) func(context.Context, int) error {
	return func(ctx context.Context, i int) error {
		_, err := l.Allow(ctx, fmt.Sprint("user:", i), ours.PerMinute(100))
		return err
	}
}

var fixed = []contender{
	{"ulule's Redis store (Lua)", false, func(rdb *redis.Client) (func(context.Context, int) error, error) {
		s, err := theirstore.NewStore(rdb)
		return store(s), err
	}},
	{"this ulule store", true, func(rdb *redis.Client) (func(context.Context, int) error, error) {
		s, err := ourstore.NewStore(rdb)
		return store(s), err
	}},
	{"this ulule store, a scripts-only wrapper (EVALSHA)", false, func(rdb *redis.Client) (func(context.Context, int) error, error) {
		s, err := ourstore.NewStore(wrappers.NewScriptsOnly(rdb))
		return store(s), err
	}},
}

func store(s limiter.Store) func(context.Context, int) error {
	l := limiter.New(s, limiter.Rate{Period: time.Minute, Limit: 100})
	return func(ctx context.Context, i int) error {
		_, err := l.Get(ctx, fmt.Sprint("user:", i))
		return err
	}
}

// measure is the server CPU µs per decision of c's recorded commands, replayed in pipelines.
func measure(server *servers.Server, c contender, decisions int) (float64, error) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr(), Protocol: 2})
	defer rdb.Close()
	decide, err := c.make(rdb)
	if err != nil {
		return 0, err
	}
	if err := decide(ctx, -1); err != nil { // scripts loaded, the backend found out: not counted
		return 0, err
	}
	rec := &recorder{}
	rdb.AddHook(rec)
	rdb.FlushAll(ctx)
	rec.sent = nil
	for i := 0; i < decisions; i++ {
		if err := decide(ctx, i%identities); err != nil {
			return 0, err
		}
	}
	replay := redis.NewClient(&redis.Options{Addr: server.Addr(), Protocol: 2})
	defer replay.Close()
	replay.FlushAll(ctx)
	before := cpuNS(server.Pid())
	for start := 0; start < len(rec.sent); start += pipeline {
		pipe := replay.Pipeline()
		for _, args := range rec.sent[start:min(start+pipeline, len(rec.sent))] {
			pipe.Do(ctx, args...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, err
		}
	}
	return float64(cpuNS(server.Pid())-before) / float64(decisions) / 1000, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func main() {
	out := flag.String("out", "", "the markdown report to write")
	module := flag.String("module", "", "the built module")
	quick := flag.Bool("quick", false, "a smoke run")
	flag.Parse()
	binaries := flag.Args()
	if *out == "" || *module == "" || len(binaries) == 0 {
		fmt.Fprintln(os.Stderr, "usage: bench --module libredis_ratelimit.so --out report.md [--quick] server-binary...")
		os.Exit(2)
	}
	decisions, reps := 10_000, 3
	if *quick {
		decisions, reps = 300, 1
	}
	lines := []string{
		"# The Go packages against redis_rate and ulule/limiter",
		"",
		fmt.Sprintf("Measured %s by `make bench` (clients/go/tests/bench): go-redis/redis_rate v10.0.1 and ulule/limiter v3.11.2 "+
			"over go-redis v9.23.0; %d decisions a run through each library's own API, %d identities at 100 a minute, "+
			"their commands recorded and sent again in pipelines of %d, %d repetitions interleaved, medians. Server CPU is the "+
			"server process's CPU clock.", time.Now().Format("2006-01-02"), decisions, identities, pipeline, reps),
		"",
		"| server | limiter | implementation | server CPU µs/decision | × the peer's |",
		"| --- | --- | --- | ---: | ---: |",
	}
	var targets []string
	for _, binary := range binaries {
		server, err := servers.Start(servers.Options{Binary: binary, Module: *module})
		if err != nil {
			fail(err)
		}
		name := server.Name()
		for _, group := range []struct {
			what       string
			contenders []contender
		}{{"GCRA", gcra}, {"fixed window", fixed}} {
			runs := map[string][]float64{}
			for rep := 0; rep < reps; rep++ {
				for i, c := range group.contenders {
					progress("the Go packages, %s, %s: row %d/%d %s, rep %d/%d", name, group.what, i+1, len(group.contenders), c.label, rep+1, reps)
					cpu, err := measure(server, c, decisions)
					if err != nil {
						fail(fmt.Errorf("%s on %s: %w", c.label, name, err))
					}
					runs[c.label] = append(runs[c.label], cpu)
				}
			}
			peer := median(runs[group.contenders[0].label])
			for _, c := range group.contenders {
				cpu := median(runs[c.label])
				lines = append(lines, fmt.Sprintf("| %s | %s | %s | %.2f | %.2f |", name, group.what, c.label, cpu, cpu/peer))
				if c.held {
					met := "yes"
					if cpu/peer > target {
						met = "no"
					}
					targets = append(targets, fmt.Sprintf("| %s: %s, %s ≤ %.1f× %s | %.2f | %s |", name, group.what, c.label, target,
						group.contenders[0].label, cpu/peer, met))
				}
			}
		}
		server.Stop()
	}
	lines = append(lines, "", "## Targets", "", "| target | measured | met |", "| --- | ---: | :---: |")
	lines = append(append(lines, targets...), "")
	report := strings.Join(lines, "\n")
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fail(err)
	}
	if err := os.WriteFile(*out, []byte(report), 0o644); err != nil {
		fail(err)
	}
	if *quick {
		fmt.Println("Go bench smoke run passed; report in", *out)
	} else {
		fmt.Println(report)
	}
}

var started = time.Now()

// progress is a line on stderr as each row runs, with the time since the bench began.
func progress(format string, args ...any) {
	elapsed := int(time.Since(started).Seconds())
	fmt.Fprintf(os.Stderr, "bench [%02d:%02d] %s\n", elapsed/60, elapsed%60, fmt.Sprintf(format, args...))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
