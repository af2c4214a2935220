package envoy_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// differential is a configuration with every feature of the peer's that changes an answer:
// values, defaults, nesting, wildcards, share_threshold, detailed_metric, shadow_mode,
// unlimited, replaces, quota_mode, a limit of 0, and every unit.
const differential = `domain: diff
descriptors:
  - key: path
    value: /login
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    value: /api*
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 8}
  - key: user
    rate_limit: {unit: second, requests_per_unit: 4}
    descriptors:
      - key: plan
        value: free
        rate_limit: {unit: minute, requests_per_unit: 6, name: free}
      - key: plan
        value: paid
        rate_limit: {unit: day, requests_per_unit: 20}
  - key: ip
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: open
    rate_limit: {unlimited: true}
  - key: tenant
    value: big
    rate_limit: {unit: week, requests_per_unit: 15, replaces: [{name: free}]}
  - key: tenant
    value: block
    rate_limit: {unit: month, requests_per_unit: 0}
  - key: year
    rate_limit: {unit: year, requests_per_unit: 12}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
`

var descriptorChoices = [][]string{
	{"path", "/login"}, {"path", "/api/v1"}, {"path", "/apiary"}, {"path", "/files/a"}, {"path", "/files/b"}, {"path", "/other"},
	{"user", "u1"}, {"user", "u2"}, {"user", "u1", "plan", "free"}, {"user", "u2", "plan", "paid"}, {"user", "u3", "plan", "gold"},
	{"ip", "10.0.0.1"}, {"ip", "10.0.0.2"}, {"shadow", "s"}, {"open", "o"}, {"tenant", "big"}, {"tenant", "block"},
	{"year", "y"}, {"quota", "q"}, {"nomatch", "z"},
}

// overridable are the descriptors a request gives its own limit to in the test.
var overridable = [][]string{{"path", "/api/v1"}, {"path", "/other"}, {"user", "u3", "plan", "gold"}, {"nomatch", "z"}}

// randomRequest is 1 to 4 descriptors, a request's hits_addend (mostly 0: one hit) and, now and
// then, a descriptor's own (0 there: a look that counts nothing) or its own limit.
func randomRequest(r *rand.Rand) *pb.RateLimitRequest {
	req := request("diff", []uint32{0, 0, 0, 1, 2, 3}[r.IntN(6)])
	for n := 1 + r.IntN(4); n > 0; n-- {
		d := descriptorOf(descriptorChoices[r.IntN(len(descriptorChoices))])
		if r.IntN(10) == 0 {
			// The request's own limit, per minute, on a descriptor whose configured limit (if
			// any) is per minute too: the peer's keys for two units of one descriptor meet at
			// their windows' common starts, and there its counts mix (docs/envoy.md).
			d = descriptorOf(overridable[r.IntN(len(overridable))])
			d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(1 + r.IntN(5)), Unit: typev3.RateLimitUnit_MINUTE}
		}
		if r.IntN(8) == 0 {
			d.HitsAddend = wrapperspb.UInt64([]uint64{0, 1, 2, 5}[r.IntN(4)])
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	return req
}

// TestAnswers sends the same random requests to envoyproxy/ratelimit and to ours (on the module,
// and on the library where the server has no module): the same answers, headers included. A
// pair that straddles a second (the windows and the durations move there) is not compared, and
// both servers start again empty.
func TestAnswers(t *testing.T) {
	for _, backend := range []struct {
		name   string
		module bool
	}{{"module", true}, {"library", false}} {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			peerRedis, ourRedis := redisServer(t, false), redisServer(t, backend.module)
			files := map[string]string{"diff.yaml": differential}
			env := []string{"LIMIT_RESPONSE_HEADERS_ENABLED=true"}
			peer := start(t, options{binary: peerBinary, redis: peerRedis.Addr(), files: files, env: env})
			ours := start(t, options{binary: ourBinary, redis: ourRedis.Addr(), files: files, env: env})
			flush := func() {
				for _, addr := range []string{peerRedis.Addr(), ourRedis.Addr()} {
					rdb := redis.NewClient(&redis.Options{Addr: addr})
					if err := rdb.FlushAll(context.Background()).Err(); err != nil {
						t.Fatal(err)
					}
					rdb.Close()
				}
			}
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			r := rand.New(rand.NewPCG(seed, 1))
			compared, straddled := 0, 0
			for compared < 2000 {
				if into := time.Now().Nanosecond(); into > 970_000_000 {
					time.Sleep(time.Duration(1_002_000_000 - into))
				}
				req := randomRequest(r)
				before := time.Now().Unix()
				want, peerErr := peer.ask(t, req)
				got, ourErr := ours.ask(t, req)
				if time.Now().Unix() != before {
					straddled++
					flush()
					continue
				}
				compared++
				if (peerErr == nil) != (ourErr == nil) || !proto.Equal(want, got) {
					t.Fatalf("request %d differs (seed %d):\n%s\npeer: %v %v\nours: %v %v", compared, seed, req, want, peerErr, got, ourErr)
				}
			}
			t.Logf("%d requests compared, 0 mismatches, %d straddling a second not compared", compared, straddled)
			assertMetricsAgree(t, ours)
		})
	}
}

// assertMetricsAgree checks that ours counts in the peer's stat names.
func assertMetricsAgree(t *testing.T, s *service) {
	t.Helper()
	_, text := s.get("/metrics", s.httpPort)
	for _, want := range []string{
		`ratelimit_service_rate_limit_total_hits{domain="diff",key1="path_/login"} `,
		`ratelimit_service_rate_limit_over_limit{domain="diff",key1="tenant_block"} `,
		`ratelimit_service_rate_limit_shadow_mode{domain="diff",key1="shadow"} `,
		`ratelimit_service_rate_limit_within_limit{domain="diff",key1="user",key2="plan_paid"} `,
		`ratelimit_service_rate_limit_near_limit{domain="diff",key1="ip_10_0_0_1"} `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics has no %s:\n%s", want, text)
		}
	}
}
