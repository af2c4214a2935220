package envoy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/tests/servers"
)

// benchConfig has limits no request stream of the bench exhausts: every request is counted.
const benchConfig = `domain: bench
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000000}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 1000000}
  - key: tenant
    rate_limit: {unit: day, requests_per_unit: 1000000}
`

// cpu is the time a process's threads have spent on a CPU (their schedstat, in ns).
func cpu(pid int) time.Duration {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	var total int64
	for _, task := range tasks {
		text, err := os.ReadFile(task)
		if err != nil {
			continue
		}
		n, _ := strconv.ParseInt(strings.Fields(string(text))[0], 10, 64)
		total += n
	}
	return time.Duration(total)
}

type benchRow struct {
	descriptors            int
	contender              string
	perSecond              float64
	redisCPU, serviceCPU   time.Duration
	redisRatio, svcRatio   float64
	runsRedis, runsService []time.Duration
}

// BenchmarkServices sends the same request stream (1, 2 and 4 descriptors a request, 32 callers)
// through envoyproxy/ratelimit and ours, each on its own server on this machine, and measures the
// Redis server's CPU and the service's per request (benches/results/envoy.md; make bench). Run it
// with -test.bench Services -test.benchtime 1x; ENVOY_BENCH_OUT names the report,
// ENVOY_BENCH_QUICK=1 makes it short.
func BenchmarkServices(b *testing.B) {
	quick := os.Getenv("ENVOY_BENCH_QUICK") == "1"
	duration, repetitions := 3*time.Second, 3
	if quick {
		duration, repetitions = 500*time.Millisecond, 1
	}
	files := map[string]string{"bench.yaml": benchConfig}
	peerRedis, ourRedis, hitallRedis := redisServer(b, false), redisServer(b, true), redisServer(b, true)
	type contender struct {
		short, name string
		svc         *service
		redis       int
	}
	contenders := []contender{
		{"peer", "envoyproxy/ratelimit", start(b, options{binary: peerBinary, redis: peerRedis.Addr(), files: files}), peerRedis.Pid()},
		{"ours", "redis-ratelimit-envoy", start(b, options{binary: ourBinary, redis: ourRedis.Addr(), files: files}), ourRedis.Pid()},
		{"ours-hitall", "redis-ratelimit-envoy, all or nothing (HITALL)", start(b, options{binary: ourBinary, redis: hitallRedis.Addr(), files: files,
			env: []string{"REDIS_RATELIMIT_ALL_OR_NOTHING=true"}}), hitallRedis.Pid()},
	}
	var rows []*benchRow
	for _, n := range []int{1, 2, 4} {
		perContender := make([]*benchRow, len(contenders))
		for i, c := range contenders {
			perContender[i] = &benchRow{descriptors: n, contender: c.name}
		}
		for rep := 0; rep < repetitions; rep++ {
			for i, c := range contenders {
				fmt.Fprintf(os.Stderr, "bench: the Envoy service, %d descriptors: row %d/%d %s, rep %d/%d\n", n, i+1, len(contenders), c.name, rep+1, repetitions)
				row := perContender[i]
				requests, redisCPU, serviceCPU := load(b, c.svc, n, duration, c.redis)
				row.perSecond += float64(requests) / duration.Seconds() / float64(repetitions)
				row.runsRedis = append(row.runsRedis, redisCPU/time.Duration(requests))
				row.runsService = append(row.runsService, serviceCPU/time.Duration(requests))
			}
		}
		for i, row := range perContender {
			row.redisCPU, row.serviceCPU = median(row.runsRedis), median(row.runsService)
			row.redisRatio = float64(row.redisCPU) / float64(perContender[0].redisCPU)
			row.svcRatio = float64(row.serviceCPU) / float64(perContender[0].serviceCPU)
			rows = append(rows, row)
			b.ReportMetric(row.redisRatio, fmt.Sprintf("redis-cpu-x-peer/%d-descriptors-%s", n, contenders[i].short))
		}
	}
	report := renderBench(rows, duration, repetitions)
	fmt.Print(report)
	if out := os.Getenv("ENVOY_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func median(runs []time.Duration) time.Duration {
	sorted := append([]time.Duration(nil), runs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	return sorted[len(sorted)/2]
}

// load sends requests of n descriptors from 32 callers for duration: the requests answered, and
// the CPU the Redis server and the service spent meanwhile.
func load(b *testing.B, s *service, n int, duration time.Duration, redisPid int) (int64, time.Duration, time.Duration) {
	keys := []string{"user", "path", "ip", "tenant"}
	var done atomic.Int64
	var failed atomic.Value
	stop := time.Now().Add(duration)
	redisBefore, serviceBefore := cpu(redisPid), cpu(s.cmd.Process.Pid)
	var wg sync.WaitGroup
	for caller := 0; caller < 32; caller++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(caller), 7))
			for time.Now().Before(stop) {
				var descriptors [][]string
				for i := 0; i < n; i++ {
					descriptors = append(descriptors, []string{keys[i], strconv.Itoa(r.IntN(10000))})
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := s.client.ShouldRateLimit(ctx, request("bench", 0, descriptors...))
				cancel()
				if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
					failed.Store(fmt.Sprint(resp, err))
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		b.Fatalf("%s: %v", s.name, f)
	}
	return done.Load(), cpu(redisPid) - redisBefore, cpu(s.cmd.Process.Pid) - serviceBefore
}

func renderBench(rows []*benchRow, duration time.Duration, repetitions int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# The Envoy rate limit service against envoyproxy/ratelimit\n\n")
	fmt.Fprintf(&b, "Measured %s on this machine (%s). The same request stream through each service, 32 gRPC callers, "+
		"%s a run, %d run(s) interleaved, medians; keys drawn from 10,000 per descriptor, no limit reached. Each service "+
		"has its own Redis server (%s; the peer's without the module). CPU is each process's threads' time on a CPU "+
		"(schedstat) per request; the load generator shares the machine.\n\n",
		time.Now().UTC().Format("2006-01-02"), servers.CPUModel(), duration, repetitions, serverVersion())
	fmt.Fprintf(&b, "| descriptors | service | requests/s | Redis CPU µs/request | × peer | service CPU µs/request | × peer |\n")
	fmt.Fprintf(&b, "| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %s | %.0f | %.2f | %.2f | %.2f | %.2f |\n", r.descriptors, r.contender, r.perSecond,
			float64(r.redisCPU)/1e3, r.redisRatio, float64(r.serviceCPU)/1e3, r.svcRatio)
	}
	return b.String()
}

func serverVersion() string {
	binary := os.Getenv("REDIS_SERVER")
	if binary == "" {
		binary = "redis-server"
	}
	return filepath.Base(binary)
}
