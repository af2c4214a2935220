// Command hotbench is `make bench`'s hot limit rows: decisions a second on one limit from 8
// processes on this machine, and the server's commands per decision, through HotLimit (blocks of
// tokens spent locally) and through one HIT per decision (a round trip each, pipelined by
// rueidis across 16 callers a process).
//
// Each run is 8 child processes (this program again, with --child), started together on one key
// of 1 s windows laid on the clock (ALIGN: the windows are this machine's seconds, as each child
// sees them), for a few seconds; each child reports its decisions and its admissions per window.
// HotLimit runs twice: under a limit no demand reaches (how fast the processes decide), then
// under 0.8x that rate (the limit binds: never over, and how far under in the whole windows).
// --quick is the smoke run `make test` makes so that this cannot rot.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlrueidis"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/tests/servers"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

const (
	processes = 8
	// hitCallers are each process's goroutines sending HITs (rueidis pipelines them).
	hitCallers = 16
	// target: decisions a second at least, server commands per 1,000 decisions at most.
	targetRate     = 10_000_000
	targetCommands = 1.0
)

// report is one child's: its decisions, and its admissions by window (Unix second), certain
// (the Take began and returned in the window) or straddling two.
type report struct {
	Decisions  int64           `json:"decisions"`
	Admitted   map[int64]int64 `json:"admitted"`
	Straddling int64           `json:"straddling"`
}

// count counts one decision made between before and after.
func (r *report) count(allowed bool, before, after time.Time) {
	r.Decisions++
	switch {
	case !allowed:
	case before.Unix() == after.Unix():
		r.Admitted[after.Unix()]++
	default:
		r.Straddling++
	}
}

func child(mode, addr, key string, limit int64, until time.Time) report {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	l := rlrueidis.New(client)
	f := ratelimit.Fixed{Limit: limit, Window: time.Second, Align: true}
	ctx := context.Background()
	r := report{Admitted: map[int64]int64{}}
	if mode == "hot" {
		hot := l.Hot(key, f, ratelimit.HotOptions{})
		for before := time.Now(); ; {
			ok, err := hot.Take(ctx, 1)
			after := time.Now()
			if err != nil {
				panic(err)
			}
			if after.After(until) {
				break
			}
			r.count(ok, before, after)
			before = after
		}
		if err := hot.Close(ctx); err != nil {
			panic(err)
		}
		return r
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range hitCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for before := time.Now(); ; {
				d, err := l.Hit(ctx, key, f)
				after := time.Now()
				if err != nil {
					panic(err)
				}
				if after.After(until) {
					return
				}
				mu.Lock()
				r.count(d.Allowed, before, after)
				mu.Unlock()
				before = after
			}
		}()
	}
	wg.Wait()
	return r
}

// result is one run's: decisions a second, the server's limiter commands per 1,000 decisions,
// the most a window admitted over the limit, and the largest shortfall of a whole window.
type result struct {
	rate, commands      float64
	over, under         int64
	windows, straddling int64
}

func commands(rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		panic(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_ratelimit.") {
			var calls int64
			fmt.Sscanf(line[strings.Index(line, ":calls=")+len(":calls="):], "%d", &calls)
			n += calls
		}
	}
	return n
}

func run(mode, addr, key string, limit int64, seconds float64) result {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	before := commands(rdb)
	start := time.Now().Add(300 * time.Millisecond)
	until := start.Add(time.Duration(seconds * float64(time.Second)))
	var outs []*strings.Builder
	var cmds []*exec.Cmd
	for range processes {
		out := &strings.Builder{}
		cmd := exec.Command(os.Args[0], "--child", mode, "--addr", addr, "--key", key,
			"--limit", fmt.Sprint(limit), "--start", fmt.Sprint(start.UnixNano()), "--until", fmt.Sprint(until.UnixNano()))
		cmd.Stdout, cmd.Stderr = out, os.Stderr
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		outs, cmds = append(outs, out), append(cmds, cmd)
	}
	admitted := map[int64]int64{}
	var decisions, straddling int64
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			panic(fmt.Sprintf("a %s child: %v", mode, err))
		}
		var r report
		if err := json.Unmarshal([]byte(outs[i].String()), &r); err != nil {
			panic(err)
		}
		decisions += r.Decisions
		straddling += r.Straddling
		for w, n := range r.Admitted {
			admitted[w] += n
		}
	}
	res := result{rate: float64(decisions) / seconds, commands: float64(commands(rdb)-before) * 1000 / float64(decisions), over: -limit,
		straddling: straddling}
	windows := make([]int64, 0, len(admitted))
	for w := range admitted {
		windows = append(windows, w)
	}
	slices.Sort(windows)
	for i, w := range windows {
		res.over = max(res.over, admitted[w]-limit)
		if i > 0 && i < len(windows)-1 {
			// An admission straddling two windows may be this one's.
			res.windows++
			res.under = max(res.under, limit-admitted[w]-straddling)
		}
	}
	return res
}

func main() {
	mode := flag.String("child", "", "run as a child: hot or hit")
	addr := flag.String("addr", "", "the server (a child's)")
	key := flag.String("key", "", "the key (a child's)")
	limit := flag.Int64("limit", 0, "the limit per second (a child's)")
	startAt := flag.Int64("start", 0, "when to start, Unix ns (a child's)")
	until := flag.Int64("until", 0, "when to stop, Unix ns (a child's)")
	module := flag.String("module", "", "the module to load")
	out := flag.String("out", "", "the Markdown file to write")
	quick := flag.Bool("quick", false, "a short smoke run")
	flag.Parse()
	if *mode != "" {
		time.Sleep(time.Until(time.Unix(0, *startAt)))
		r := child(*mode, *addr, *key, *limit, time.Unix(0, *until))
		if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
			panic(err)
		}
		return
	}
	binary := servers.Binary()
	if flag.NArg() > 0 {
		binary = flag.Arg(0)
	}
	server, err := servers.Start(servers.Options{Binary: binary, Module: *module})
	if err != nil {
		panic(err)
	}
	defer server.Stop()
	seconds := 4.0
	if *quick {
		seconds = 1.5
	}
	const unbound = 1 << 50
	row := func(i int, what string) {
		fmt.Fprintf(os.Stderr, "bench: the hot limit, %s: row %d/3 %s\n", server.Name(), i, what)
	}
	row(1, "HotLimit, no limit reached")
	free := run("hot", server.Addr(), "hot:free", unbound, seconds)
	bound := int64(0.8 * free.rate)
	row(2, "HotLimit, a limit reached")
	bindings := run("hot", server.Addr(), "hot:bound", bound, seconds+1)
	row(3, "one HIT per decision")
	hit := run("hit", server.Addr(), "hit:free", unbound, seconds)
	var b strings.Builder
	fmt.Fprintf(&b, "# A limit shared by 8 processes: HotLimit against one HIT per decision\n\n")
	fmt.Fprintf(&b, "Measured %s on this machine (%s, %s), Go client over rueidis. 8 processes (each one goroutine taking "+
		"through its HotLimit, or %d goroutines sending HITs), one key, 1 s windows laid on the clock, %.1f s a run. "+
		"Under a limit no demand reaches, then under 0.8x the rate the first run reached (the limit binds: over is the most "+
		"a window admitted past the limit, under the largest shortfall of a whole window).\n\n",
		time.Now().Format("2006-01-02"), servers.CPUModel(), server.Name(), hitCallers, seconds)
	fmt.Fprintf(&b, "| run | decisions/s | server commands per 1,000 decisions | over | under |\n| --- | ---: | ---: | ---: | ---: |\n")
	fmt.Fprintf(&b, "| HotLimit, no limit reached | %.0f | %.3f | | |\n", free.rate, free.commands)
	fmt.Fprintf(&b, "| HotLimit, limit %d/s | %.0f | %.3f | %d | %d (%.3f%%, %d whole windows) |\n",
		bound, bindings.rate, bindings.commands, max(bindings.over, 0), max(bindings.under, 0),
		100*float64(max(bindings.under, 0))/float64(bound), bindings.windows)
	fmt.Fprintf(&b, "| one HIT per decision | %.0f | %.0f | | |\n", hit.rate, hit.commands)
	fmt.Fprintf(&b, "\nAn admission is counted in a window when its Take began and returned in it; %d of the bound run's "+
		"straddled two windows (not counted over, counted against under).\n", bindings.straddling)
	verdict := "met"
	if free.rate < targetRate || free.commands > targetCommands || bindings.over > 0 || float64(bindings.under) > 0.01*float64(bound) {
		verdict = "not met"
	}
	fmt.Fprintf(&b, "\nTarget: %d decisions/s or more at %.0f server command per 1,000 decisions or fewer, never over, at most 1%% under: %s.\n",
		targetRate, targetCommands, verdict)
	fmt.Print(b.String())
	if *out != "" {
		if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
			panic(err)
		}
	}
	if bindings.over > 0 {
		fmt.Fprintln(os.Stderr, "over the limit")
		os.Exit(1)
	}
}
