package service

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// Health is the service's health: failed from SIGTERM on, while Redis is unreachable (when
// REDIS_HEALTH_CHECK_ACTIVE_CONNECTION), or until a configuration with a domain loads (when
// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED).
type Health struct {
	Draining atomic.Bool
	RedisOK  atomic.Bool
	service  *Service
}

// NewHealth is s's health.
func NewHealth(s *Service) *Health {
	h := &Health{service: s}
	h.RedisOK.Store(true)
	return h
}

// OK reports whether the service is healthy.
func (h *Health) OK() bool {
	if h.Draining.Load() || h.service.settings.RedisHealthCheckActiveConnection && !h.RedisOK.Load() {
		return false
	}
	if h.service.settings.HealthyWithAtLeastOneConfigLoaded {
		c := h.service.Config()
		return c != nil && !c.Empty()
	}
	return true
}

// Routes are the peer's endpoints on the HTTP port (/healthcheck, /json), and /metrics.
func (s *Service) Routes(h *Health) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthcheck", func(w http.ResponseWriter, _ *http.Request) {
		if h.OK() {
			_, _ = w.Write([]byte("OK"))
			return
		}
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
	})
	mux.HandleFunc("/json", s.serveJSON)
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		s.Stats.write(w)
	})
	return mux
}

// DebugRoutes are the peer's endpoints on the debug port (/rlconfig).
func (s *Service) DebugRoutes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/rlconfig", func(w http.ResponseWriter, _ *http.Request) {
		if c := s.Config(); c != nil {
			_, _ = io.WriteString(w, c.Dump())
		}
	})
	return mux
}

// serveJSON is ShouldRateLimit over HTTP: a RateLimitRequest in proto JSON, answered 200, or 429
// when over the limit, and 400 for a request it cannot read or decide.
func (s *Service) serveJSON(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req pb.RateLimitRequest
	if err == nil {
		err = protojson.Unmarshal(body, &req)
	}
	var response *pb.RateLimitResponse
	if err == nil {
		response, err = s.ShouldRateLimit(context.WithoutCancel(r.Context()), &req)
	}
	if err != nil {
		http.Error(w, http.StatusText(http.StatusBadRequest), http.StatusBadRequest)
		return
	}
	text, err := protojson.Marshal(response)
	if err != nil {
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if response.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	_, _ = w.Write(text)
}

// escape writes a label's value as Prometheus's text format reads it.
var escape = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// write prints the counters in Prometheus's text format, with the names and labels the peer's
// statsd mapping gives them: a limit's domain and its first two keys.
func (s *Stats) write(w io.Writer) {
	type labels struct{ domain, key1, key2 string }
	perLimit := map[labels]*[5]uint64{}
	s.limits.Range(func(_, value any) bool {
		l := value.(*limitStats)
		parts := strings.SplitN(l.name, ".", 4)
		var at labels
		at.domain = parts[0]
		if len(parts) > 1 {
			at.key1 = parts[1]
		}
		if len(parts) > 2 {
			at.key2 = parts[2]
		}
		sums := perLimit[at]
		if sums == nil {
			sums = &[5]uint64{}
			perLimit[at] = sums
		}
		for i, counter := range []*atomic.Uint64{&l.totalHits, &l.overLimit, &l.nearLimit, &l.withinLimit, &l.shadowMode} {
			sums[i] += counter.Load()
		}
		return true
	})
	keys := make([]labels, 0, len(perLimit))
	for at := range perLimit {
		keys = append(keys, at)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		return a.domain+"\x00"+a.key1+"\x00"+a.key2 < b.domain+"\x00"+b.key1+"\x00"+b.key2
	})
	for i, name := range []string{"total_hits", "over_limit", "near_limit", "within_limit", "shadow_mode"} {
		metric := "ratelimit_service_rate_limit_" + name
		fmt.Fprintf(w, "# TYPE %s counter\n", metric)
		for _, at := range keys {
			set := `domain="` + escape.Replace(at.domain) + `",key1="` + escape.Replace(at.key1) + `"`
			if at.key2 != "" {
				set += `,key2="` + escape.Replace(at.key2) + `"`
			}
			fmt.Fprintf(w, "%s{%s} %d\n", metric, set, perLimit[at][i])
		}
	}
	fmt.Fprintf(w, "# TYPE ratelimit_service_should_rate_limit_error counter\n")
	fmt.Fprintf(w, "ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"} %d\n", s.redisErrors.Load())
	fmt.Fprintf(w, "ratelimit_service_should_rate_limit_error{err_type=\"service_error\"} %d\n", s.serviceErrors.Load())
	fmt.Fprintf(w, "# TYPE ratelimit_service_config_load_success counter\nratelimit_service_config_load_success %d\n", s.configLoadSuccess.Load())
	fmt.Fprintf(w, "# TYPE ratelimit_service_config_load_error counter\nratelimit_service_config_load_error %d\n", s.configLoadError.Load())
	fmt.Fprintf(w, "# TYPE ratelimit_service_global_shadow_mode counter\nratelimit_service_global_shadow_mode %d\n", s.globalShadowMode.Load())
}
