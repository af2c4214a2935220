package envoy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/tests/servers"
)

const perMinute = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: LIMIT\n"

func withLimit(n int) string { return strings.Replace(perMinute, "LIMIT", strconv.Itoa(n), 1) }

// eventually waits (at most 10 s) for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

func limitOf(t *testing.T, s *service) uint32 {
	t.Helper()
	r, err := s.ask(t, request("d", 0, []string{"k", "v"}))
	if err != nil {
		return 0
	}
	return r.Statuses[0].GetCurrentLimit().GetRequestsPerUnit()
}

// TestReload: a changed file is in force within seconds; a refused one leaves the last good one
// (and is logged); a runtime root swapped as a symlink is seen (RUNTIME_WATCH_ROOT).
func TestReload(t *testing.T) {
	t.Parallel()
	rs := redisServer(t, true)
	s := start(t, options{binary: ourBinary, redis: rs.Addr(), files: map[string]string{"a.yaml": withLimit(5)}})
	if got := limitOf(t, s); got != 5 {
		t.Fatalf("limit %d, want 5", got)
	}
	write := func(text string) {
		if err := os.WriteFile(filepath.Join(s.configDir, "a.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(withLimit(7))
	eventually(t, "the new limit in force", func() bool { return limitOf(t, s) == 7 })
	write("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 9\n")
	eventually(t, "the refused file logged", func() bool {
		return strings.Contains(s.log.String(), "Error loading new configuration: a.yaml: invalid rate limit unit 'fortnight'")
	})
	if got := limitOf(t, s); got != 7 {
		t.Fatalf("after a refused file the limit is %d, want the last good 7", got)
	}

	// The peer's layout for atomic swaps: RUNTIME_ROOT a symlink to one of several versions.
	root := t.TempDir()
	for version, limit := range map[string]int{"v1": 11, "v2": 13} {
		dir := filepath.Join(root, version, "ratelimit", "config")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(withLimit(limit)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	current := filepath.Join(root, "current")
	if err := os.Symlink(filepath.Join(root, "v1"), current); err != nil {
		t.Fatal(err)
	}
	swapped := start(t, options{binary: ourBinary, redis: rs.Addr(), env: []string{"RUNTIME_ROOT=" + current, "RUNTIME_WATCH_ROOT=true"}})
	if got := limitOf(t, swapped); got != 11 {
		t.Fatalf("limit %d, want 11", got)
	}
	next := filepath.Join(root, "next")
	if err := os.Symlink(filepath.Join(root, "v2"), next); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, current); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the swapped root in force", func() bool { return limitOf(t, swapped) == 13 })
}

// TestRedisDown: with Redis gone, a limited request fails (gRPC Unknown) on both services, and
// one no limit applies to is answered OK; with REDIS_RATELIMIT_FAIL_OPEN ours admits it. When
// the server is back on its port, ours answers again.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a.yaml": withLimit(5)}
	ourRedis, peerRedis := redisServer(t, true), redisServer(t, false)
	ours := start(t, options{binary: ourBinary, redis: ourRedis.Addr(), files: files})
	open := start(t, options{binary: ourBinary, redis: ourRedis.Addr(), files: files, env: []string{"REDIS_RATELIMIT_FAIL_OPEN=true"}})
	peer := start(t, options{binary: peerBinary, redis: peerRedis.Addr(), files: files})
	limited, free := request("d", 0, []string{"k", "v"}), request("d", 0, []string{"other", "v"})
	for _, s := range []*service{ours, open, peer} {
		if r, err := s.ask(t, limited); err != nil || r.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("%s with Redis up: %v %v", s.name, r, err)
		}
	}
	ourRedis.Stop()
	peerRedis.Stop()
	for _, s := range []*service{ours, peer} {
		if _, err := s.ask(t, limited); status.Code(err) != codes.Unknown {
			t.Fatalf("%s with Redis down answered %v, want code Unknown", s.name, err)
		}
		if r, err := s.ask(t, free); err != nil || r.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("%s with Redis down, no limit: %v %v", s.name, r, err)
		}
	}
	r, err := open.ask(t, limited)
	if err != nil || r.OverallCode != pb.RateLimitResponse_OK || r.Statuses[0].CurrentLimit != nil {
		t.Fatalf("fail open: %v %v", r, err)
	}
	if _, text := ours.get("/metrics", ours.httpPort); !strings.Contains(text, `err_type="redis_error"} 1`) {
		t.Fatalf("the redis error is not counted:\n%s", text)
	}

	// The same port again: rueidis reconnects.
	module, _ := servers.Module()
	back := restartOn(t, ourRedis.Port, module)
	defer back.Kill()
	eventually(t, "answers with Redis back", func() bool {
		r, err := ours.ask(t, limited)
		return err == nil && r.Statuses[0].LimitRemaining == 4
	})
}

// restartOn starts a server with the module on port (the tests' servers package picks its own).
func restartOn(t *testing.T, port int, module string) *os.Process {
	t.Helper()
	dir := t.TempDir()
	attr := &os.ProcAttr{Dir: dir, Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	p, err := os.StartProcess(lookPath(t, servers.Binary()), []string{servers.Binary(), "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loadmodule", module}, attr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func lookPath(t *testing.T, binary string) string {
	t.Helper()
	if strings.Contains(binary, "/") {
		return binary
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(dir, binary)); err == nil {
			return filepath.Join(dir, binary)
		}
	}
	t.Fatalf("%s not found", binary)
	return ""
}

// TestAllOrNothing: with REDIS_RATELIMIT_ALL_OR_NOTHING a request's descriptors are decided in
// one HITALL: one exhausted limit denies the request and counts on none, and denied hits never
// count. On a cluster too (the keys share the domain's slot).
func TestAllOrNothing(t *testing.T) {
	t.Parallel()
	config := "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 2}\n  - key: b\n    rate_limit: {unit: hour, requests_per_unit: 10}\n" +
		"  - key: block\n    rate_limit: {unit: hour, requests_per_unit: 0}\n"
	check := func(t *testing.T, s *service, count func(pattern string) int64) {
		both := request("d", 0, []string{"a", "x"}, []string{"b", "y"})
		for i := 0; i < 2; i++ {
			if r, err := s.ask(t, both); err != nil || r.OverallCode != pb.RateLimitResponse_OK {
				t.Fatalf("hit %d: %v %v", i, r, err)
			}
		}
		r, err := s.ask(t, both)
		if err != nil || r.OverallCode != pb.RateLimitResponse_OVER_LIMIT || r.Statuses[0].Code != pb.RateLimitResponse_OVER_LIMIT ||
			r.Statuses[1].Code != pb.RateLimitResponse_OK || r.Statuses[1].LimitRemaining != 8 {
			t.Fatalf("the third: %v %v", r, err)
		}
		// A limit of 0 admits nothing: the others are only looked at.
		r, err = s.ask(t, request("d", 0, []string{"b", "y"}, []string{"block", "z"}))
		if err != nil || r.OverallCode != pb.RateLimitResponse_OVER_LIMIT || r.Statuses[0].Code != pb.RateLimitResponse_OK ||
			r.Statuses[0].LimitRemaining != 8 || r.Statuses[1].Code != pb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("beside a limit of 0: %v %v", r, err)
		}
		if a, b := count("*_a_x_*"), count("*_b_y_*"); a != 2 || b != 2 {
			t.Fatalf("counts a=%d b=%d, want 2 and 2: a denied request counts on none", a, b)
		}
	}
	t.Run("one server", func(t *testing.T) {
		t.Parallel()
		rs := redisServer(t, true)
		s := start(t, options{binary: ourBinary, redis: rs.Addr(), files: map[string]string{"a.yaml": config},
			env: []string{"REDIS_RATELIMIT_ALL_OR_NOTHING=true"}})
		rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
		defer rdb.Close()
		check(t, s, func(pattern string) int64 { return countOf(t, rdb, pattern) })
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		addrs := cluster(t)
		s := start(t, options{binary: ourBinary, redis: strings.Join(addrs, ","), redisType: "CLUSTER", files: map[string]string{"a.yaml": config},
			env: []string{"REDIS_RATELIMIT_ALL_OR_NOTHING=true"}})
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		defer rdb.Close()
		check(t, s, func(pattern string) int64 {
			var total int64
			_ = rdb.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
				total += countOf(t, node, pattern)
				return nil
			})
			return total
		})
	})
}

// cluster starts three nodes with the module, forms a cluster of them, and gives their addresses.
func cluster(t *testing.T) []string {
	t.Helper()
	var nodes []*servers.Server
	var addrs []string
	module, _ := servers.Module()
	for i := 0; i < 3; i++ {
		node, err := servers.Start(servers.Options{Module: module, Cluster: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(node.Stop)
		nodes, addrs = append(nodes, node), append(addrs, node.Addr())
	}
	if err := servers.Cluster(nodes); err != nil {
		t.Fatal(err)
	}
	return addrs
}

// countOf sums the counters whose keys match pattern.
func countOf(t *testing.T, rdb *redis.Client, pattern string) int64 {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, key := range keys {
		n, err := rdb.Get(ctx, key).Int64()
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// TestCluster: the peer's answers on a cluster, each descriptor's key on its own primary (twelve
// keys all in one third of the slots: once in 177,000 runs).
func TestCluster(t *testing.T) {
	t.Parallel()
	addrs := cluster(t)
	s := start(t, options{binary: ourBinary, redis: strings.Join(addrs, ","), redisType: "CLUSTER", files: map[string]string{"a.yaml": withLimit(3)}})
	var req *pb.RateLimitRequest = request("d", 0)
	for i := 0; i < 12; i++ {
		req.Descriptors = append(req.Descriptors, request("d", 0, []string{"k", "user" + strconv.Itoa(i)}).Descriptors[0])
	}
	for round := 1; round <= 4; round++ {
		r, err := s.ask(t, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range r.Statuses {
			if want := uint32(max(0, 3-round)); st.LimitRemaining != want || (round == 4) != (st.Code == pb.RateLimitResponse_OVER_LIMIT) {
				t.Fatalf("round %d: %v", round, r)
			}
		}
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer rdb.Close()
	masters := 0
	_ = rdb.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		if keys, _ := node.Keys(ctx, "*").Result(); len(keys) > 0 {
			masters++
		}
		return nil
	})
	if masters < 2 {
		t.Fatalf("the twelve keys are on %d primaries", masters)
	}
}

// TestAlgorithms: our fields: a sliding window and a GCRA bucket decided by the module (denied
// hits not counted), a calendar day in a time zone (its reset at that zone's midnight).
func TestAlgorithms(t *testing.T) {
	t.Parallel()
	rs := redisServer(t, true)
	config := `domain: d
descriptors:
  - key: slide
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: sliding}
  - key: bucket
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: gcra}
  - key: day
    rate_limit: {unit: day, requests_per_unit: 5, time_zone: Asia/Kolkata}
`
	s := start(t, options{binary: ourBinary, redis: rs.Addr(), files: map[string]string{"a.yaml": config}})
	codesOf := func(key string, n int) []pb.RateLimitResponse_Code {
		var got []pb.RateLimitResponse_Code
		for i := 0; i < n; i++ {
			r, err := s.ask(t, request("d", 0, []string{key, "x"}))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r.Statuses[0].Code)
		}
		return got
	}
	ok, over := pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT
	for key, want := range map[string][]pb.RateLimitResponse_Code{"slide": {ok, ok, over, over}, "bucket": {ok, ok, ok, over, over}} {
		if got := codesOf(key, len(want)); strings.Join(codeNames(got), " ") != strings.Join(codeNames(want), " ") {
			t.Fatalf("%s: %v, want %v", key, got, want)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer rdb.Close()
	if kind, _ := rdb.Type(context.Background(), "d_bucket_x_gcra3600").Result(); kind != "string" {
		t.Fatalf("the bucket's key: %q", kind)
	}
	r, err := s.ask(t, request("d", 0, []string{"day", "x"}))
	if err != nil {
		t.Fatal(err)
	}
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	now := time.Now().In(kolkata)
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, kolkata)
	want := int64(midnight.Sub(now).Seconds())
	if got := r.Statuses[0].DurationUntilReset.Seconds; got < want-2 || got > want+2 || r.Statuses[0].LimitRemaining != 4 {
		t.Fatalf("a day in Kolkata: %v, want a reset in %d s", r.Statuses[0], want)
	}
}

func codeNames(codes []pb.RateLimitResponse_Code) []string {
	var names []string
	for _, c := range codes {
		names = append(names, c.String())
	}
	return names
}

// TestUnknownUnit: a request's own limit of no known unit is refused (the peer ends on it).
func TestUnknownUnit(t *testing.T) {
	t.Parallel()
	rs := redisServer(t, true)
	s := start(t, options{binary: ourBinary, redis: rs.Addr(), files: map[string]string{"a.yaml": withLimit(5)}})
	req := request("d", 0, []string{"k", "v"})
	req.Descriptors[0].Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5}
	if _, err := s.ask(t, req); status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "invalid rate limit unit") {
		t.Fatalf("a limit of no unit: %v", err)
	}
}

// TestRefusedCredentials: credentials Redis refuses stop the service at start, as they stop the peer.
func TestRefusedCredentials(t *testing.T) {
	t.Parallel()
	rs := redisServer(t, true)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer rdb.Close()
	if err := rdb.ConfigSet(context.Background(), "requirepass", "secret").Err(); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 3)
	cmd := exec.Command(ourBinary)
	cmd.Env = append(os.Environ(), "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+rs.Addr(), "REDIS_AUTH=wrong", "RUNTIME_ROOT="+t.TempDir(),
		"HOST=127.0.0.1", "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1", "PORT="+strconv.Itoa(ports[0]),
		"GRPC_PORT="+strconv.Itoa(ports[1]), "DEBUG_PORT="+strconv.Itoa(ports[2]))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "redis refused the credentials (REDIS_AUTH): WRONGPASS") {
		t.Fatalf("with a wrong password: %v\n%s", err, out)
	}
}

// TestShutdown: SIGTERM ends the service gracefully, with code 0.
func TestShutdown(t *testing.T) {
	t.Parallel()
	rs := redisServer(t, true)
	s := start(t, options{binary: ourBinary, redis: rs.Addr(), files: map[string]string{"a.yaml": withLimit(5)}})
	s.stop()
	if s.waitErr != nil {
		t.Fatalf("exit: %v\n%s", s.waitErr, s.log)
	}
	if !strings.Contains(s.log.String(), "shutting down") {
		t.Fatalf("no graceful shutdown:\n%s", s.log)
	}
}

// TestMetricsBounded: detailed_metric names a limit by its descriptor's value; past 1,000 names
// the service counts new ones in the domain's overflow series, and no hit goes uncounted.
func TestMetricsBounded(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    detailed_metric: true\n" +
		"    rate_limit:\n      unit: hour\n      requests_per_unit: 5\n"}
	ours := start(t, options{binary: ourBinary, redis: redisServer(t, true).Addr(), files: files})
	const values = 1100
	errs := make(chan error, values)
	for i := range values {
		go func() {
			_, err := ours.ask(t, request("d", 0, []string{"k", "v" + strconv.Itoa(i)}))
			errs <- err
		}()
	}
	for range values {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	_, text := ours.get("/metrics", ours.httpPort)
	series, total := 0, 0
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "ratelimit_service_rate_limit_total_hits{") {
			continue
		}
		series++
		n, err := strconv.Atoi(line[strings.LastIndexByte(line, ' ')+1:])
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		total += n
		if strings.Contains(line, `key1="__overflow__"`) && n != values-1000 {
			t.Errorf("the overflow series counts %d hits, want %d", n, values-1000)
		}
	}
	if series != 1001 || total != values {
		t.Fatalf("%d total_hits series counting %d hits, want 1001 counting %d", series, total, values)
	}
}

// TestBatches: in the default mode, concurrent requests' descriptors go in shared HITALLs
// (while one is in flight, the next requests' wait for it), every hit counted once; a key all
// requests share still counts each; a key Redis refuses fails its request alone. Redis is held
// (CLIENT PAUSE WRITE) while the requests come, so that they certainly meet behind the first
// call, whatever the machine's load.
func TestBatches(t *testing.T) {
	t.Parallel()
	perDay := "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: day\n      requests_per_unit: 1000\n"
	for _, module := range []bool{true, false} {
		t.Run(map[bool]string{true: "module", false: "library"}[module], func(t *testing.T) {
			t.Parallel()
			rs := redisServer(t, module)
			s := start(t, options{binary: ourBinary, redis: rs.Addr(), files: map[string]string{"a.yaml": perDay}})
			rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
			defer rdb.Close()
			ctx := context.Background()
			calls := func() int64 {
				info, err := rdb.Info(ctx, "commandstats").Result()
				if err != nil {
					t.Fatal(err)
				}
				var n int64
				for _, line := range strings.Split(info, "\n") {
					if strings.HasPrefix(line, "cmdstat_ratelimit.hit") || strings.HasPrefix(line, "cmdstat_fcall:") {
						calls, _, _ := strings.Cut(strings.TrimPrefix(line[strings.Index(line, ":")+1:], "calls="), ",")
						c, _ := strconv.ParseInt(calls, 10, 64)
						n += c
					}
				}
				return n
			}
			// Each value's key, as the service names it: today's and tomorrow's window (a day
			// may end during the test).
			dayKeys := func(value string) []string {
				day := time.Now().Unix() / 86400 * 86400
				return []string{"d_k_" + value + "_" + strconv.FormatInt(day, 10), "d_k_" + value + "_" + strconv.FormatInt(day+86400, 10)}
			}
			for _, key := range dayKeys("refused") {
				if err := rdb.RPush(ctx, key, "x").Err(); err != nil {
					t.Fatal(err)
				}
			}
			held := func(values []string) map[string]error {
				if err := rdb.Do(ctx, "CLIENT", "PAUSE", 1000, "WRITE").Err(); err != nil {
					t.Fatal(err)
				}
				errs := make(chan [2]any, len(values))
				for _, v := range values {
					go func() {
						_, err := s.ask(t, request("d", 0, []string{"k", v}))
						errs <- [2]any{v, err}
					}()
				}
				out := map[string]error{}
				for range values {
					got := <-errs
					err, _ := got[1].(error)
					out[got[0].(string)] = err
				}
				return out
			}
			remaining := func(value string) uint32 {
				look := request("d", 0, []string{"k", value})
				look.Descriptors[0].HitsAddend = wrapperspb.UInt64(0)
				r, err := s.ask(t, look)
				if err != nil {
					t.Fatal(err)
				}
				return r.Statuses[0].LimitRemaining
			}

			before := calls()
			var distinct []string
			for i := range 100 {
				distinct = append(distinct, "v"+strconv.Itoa(i))
			}
			for v, err := range held(distinct) {
				if err != nil {
					t.Fatalf("%s: %v", v, err)
				}
			}
			if n := calls() - before; n > 10 {
				t.Errorf("100 requests held behind one call went in %d calls", n)
			}
			for _, v := range distinct {
				if left := remaining(v); left != 999 {
					t.Fatalf("%s: %d remaining, want 999", v, left)
				}
			}

			hot := make([]string, 100)
			for i := range hot {
				hot[i] = "hot"
			}
			if err := held(hot)["hot"]; err != nil {
				t.Fatal(err)
			}
			if left := remaining("hot"); left != 900 {
				t.Fatalf("a key every request shares: %d remaining, want 900", left)
			}

			mixed := append([]string{"refused"}, "w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8", "w9")
			for v, err := range held(mixed) {
				if (v == "refused") != (status.Code(err) == codes.Unknown) {
					t.Fatalf("%s: %v (only the refused key's request fails)", v, err)
				}
			}
			for _, v := range mixed[1:] {
				if left := remaining(v); left != 999 {
					t.Fatalf("%s beside a refused key: %d remaining, want 999", v, left)
				}
			}
		})
	}
}
