// Package service answers envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit on the
// redis-ratelimit module (or its Functions library), as envoyproxy/ratelimit answers it.
package service

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/envoy/internal/config"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/envoy/internal/settings"
)

// Service is the rate limit service: the configuration in force, the limiter, the stats.
type Service struct {
	pb.UnimplementedRateLimitServiceServer

	settings settings.Settings
	// tagDomain puts the domain in a hash tag, so that a request's keys share a slot (HITALL on
	// a cluster).
	tagDomain bool
	limiter   atomic.Pointer[ratelimit.Limiter]
	config    atomic.Pointer[config.Config]
	Stats     *Stats
	now       func() time.Time
	batch     batcher
}

// New is a service with no configuration and no Redis yet.
func New(s settings.Settings) *Service {
	return &Service{settings: s, tagDomain: s.AllOrNothing && s.RedisType == "cluster", Stats: newStats(), now: time.Now,
		batch: batcher{lanes: map[string]*lane{}}}
}

// SetLimiter gives the service its Redis (once connected).
func (s *Service) SetLimiter(l *ratelimit.Limiter) { s.limiter.Store(l) }

// Limiter is the service's Redis, nil until connected.
func (s *Service) Limiter() *ratelimit.Limiter { return s.limiter.Load() }

// Load reads files into the configuration in force; a refused one leaves the last good one, as
// the peer does.
func (s *Service) Load(files []config.File) {
	c, err := config.Load(files, s.settings.MergeDomainConfig)
	if err != nil {
		s.Stats.configLoadError.Add(1)
		slog.Error("Error loading new configuration: " + err.Error())
		return
	}
	s.Stats.configLoadSuccess.Add(1)
	s.config.Store(c)
	slog.Info("Successfully loaded new configuration", "files", len(files))
}

// Config is the configuration in force, nil before one loaded.
func (s *Service) Config() *config.Config { return s.config.Load() }

// errService is an answer the peer gives as a service error (gRPC code Unknown).
type errService string

func (e errService) Error() string { return string(e) }

// ShouldRateLimit decides a request.
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	response, err := s.shouldRateLimit(ctx, req)
	if err != nil {
		var service errService
		if errors.As(err, &service) {
			s.Stats.serviceErrors.Add(1)
		} else {
			s.Stats.redisErrors.Add(1)
		}
		slog.Debug("caught error during call", "error", err)
		return nil, err
	}
	return response, nil
}

func (s *Service) shouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if req.Domain == "" {
		return nil, errService("rate limit domain must not be empty")
	}
	if len(req.Descriptors) == 0 {
		return nil, errService("rate limit descriptor list must not be empty")
	}
	cfg := s.config.Load()
	if cfg == nil {
		return nil, errService("no rate limit configuration loaded")
	}
	now := s.now().Unix()
	limits := make([]*config.Limit, len(req.Descriptors))
	unlimited := make([]bool, len(req.Descriptors))
	replaced := map[string]bool{}
	for i, d := range req.Descriptors {
		limits[i] = cfg.Lookup(req.Domain, d)
		if l := limits[i]; l != nil {
			for _, name := range l.Replaces {
				replaced[name] = true
			}
			if l.Unlimited {
				unlimited[i], limits[i] = true, nil
			}
		}
	}
	checks := make([]*check, len(req.Descriptors))
	var toSend []*check
	for i, l := range limits {
		if l == nil || l.Name != "" && replaced[l.Name] {
			continue
		}
		if config.Seconds(l.Unit) == 0 {
			return nil, errService("invalid rate limit unit " + l.Unit.String() + " in the request's limit")
		}
		c := &check{limit: l, key: s.key(req.Domain, req.Descriptors[i], l, now), addend: addend(req, i)}
		checks[i] = c
		toSend = append(toSend, c)
		s.Stats.of(l.FullKey).totalHits.Add(uint64(c.addend))
	}
	if len(toSend) > 0 {
		rl := s.limiter.Load()
		if rl == nil {
			for _, c := range toSend {
				c.err = errors.New("redis: not connected yet")
			}
		} else {
			s.decide(ctx, rl, toSend)
		}
		for _, c := range toSend {
			if c.err == nil {
				continue
			}
			var argument *ratelimit.ArgumentError
			if errors.As(c.err, &argument) {
				return nil, errService(c.err.Error())
			}
			if !s.settings.FailOpen {
				return nil, c.err
			}
			slog.Warn("redis unreachable: the descriptor is admitted (REDIS_RATELIMIT_FAIL_OPEN)", "key", c.key, "error", c.err)
		}
	}
	return s.answer(req, checks, unlimited, now), nil
}

// addend is what descriptor i counts: its own hits_addend (0: a look that counts nothing), else
// the request's (0 means 1).
func addend(req *pb.RateLimitRequest, i int) int64 {
	if own := req.Descriptors[i].GetHitsAddend(); own != nil {
		return int64(min(own.GetValue(), math.MaxInt32))
	}
	return int64(max(1, req.HitsAddend))
}

// answer makes the response from the checks, as the peer makes it.
func (s *Service) answer(req *pb.RateLimitRequest, checks []*check, unlimited []bool, now int64) *pb.RateLimitResponse {
	response := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK, Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(checks))}
	var tightest *pb.RateLimitResponse_DescriptorStatus
	least := uint32(math.MaxUint32)
	for i, c := range checks {
		var status *pb.RateLimitResponse_DescriptorStatus
		switch {
		case unlimited[i]:
			status = &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
		case c == nil || c.err != nil:
			status = &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
		default:
			status = s.status(c, now)
		}
		response.Statuses[i] = status
		if status.CurrentLimit != nil && !unlimited[i] && status.LimitRemaining < least {
			tightest, least = status, status.LimitRemaining
		}
		if status.Code == pb.RateLimitResponse_OVER_LIMIT {
			if c.limit.QuotaMode {
				response.Statuses[i] = &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK,
					CurrentLimit: status.CurrentLimit, LimitRemaining: status.LimitRemaining}
				continue
			}
			response.OverallCode = pb.RateLimitResponse_OVER_LIMIT
			tightest, least = status, 0
		}
	}
	if s.settings.HeadersEnabled && tightest != nil {
		response.ResponseHeadersToAdd = []*core.HeaderValue{
			{Key: s.settings.LimitHeader, Value: strconv.FormatUint(uint64(tightest.CurrentLimit.RequestsPerUnit), 10)},
			{Key: s.settings.RemainingHeader, Value: strconv.FormatUint(uint64(tightest.LimitRemaining), 10)},
			{Key: s.settings.ResetHeader, Value: strconv.FormatInt(tightest.DurationUntilReset.GetSeconds(), 10)},
		}
	}
	if response.OverallCode == pb.RateLimitResponse_OVER_LIMIT && s.settings.GlobalShadowMode {
		response.OverallCode = pb.RateLimitResponse_OK
		s.Stats.globalShadowMode.Add(1)
	}
	return response
}

// status is one descriptor's answer, its stats counted as the peer counts them.
func (s *Service) status(c *check, now int64) *pb.RateLimitResponse_DescriptorStatus {
	l, stats := c.limit, s.Stats.of(c.limit.FullKey)
	threshold := int64(l.RequestsPerUnit)
	near := int64(math.Floor(float64(float32(threshold) * float32(s.settings.NearLimitRatio))))
	before, after := c.count-c.addend, c.count
	over := after > threshold
	remaining := max(0, threshold-after)
	if c.byServer {
		over, remaining = !c.allowed, max(0, c.remaining)
		after = threshold - remaining
		if over {
			before = threshold
		} else {
			before = after - c.addend
		}
	}
	status := &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK, CurrentLimit: l.Proto(),
		LimitRemaining: uint32(min(remaining, math.MaxUint32)), DurationUntilReset: s.reset(c, now)}
	added := uint64(c.addend)
	if over {
		status.Code, status.LimitRemaining = pb.RateLimitResponse_OVER_LIMIT, 0
		if before >= threshold {
			stats.overLimit.Add(added)
		} else {
			stats.overLimit.Add(uint64(after - threshold))
			stats.nearLimit.Add(uint64(threshold - max(near, before)))
		}
		if l.ShadowMode {
			status.Code = pb.RateLimitResponse_OK
			if before >= threshold {
				stats.shadowMode.Add(added)
			} else {
				stats.shadowMode.Add(uint64(after - threshold))
			}
		}
		return status
	}
	if after > near {
		if before >= near {
			stats.nearLimit.Add(added)
		} else {
			stats.nearLimit.Add(uint64(after - near))
		}
	}
	stats.withinLimit.Add(added)
	return status
}

// reset is the time to the window's end in whole seconds: the peer's count from the service's
// clock for its windows, the server's for ours.
func (s *Service) reset(c *check, now int64) *durationpb.Duration {
	l := c.limit
	if l.Algorithm == config.Fixed && l.TimeZone == "" {
		seconds := config.Seconds(l.Unit)
		return &durationpb.Duration{Seconds: seconds - now%seconds}
	}
	return &durationpb.Duration{Seconds: int64((c.resetAfter + time.Second - 1) / time.Second)}
}

// Stats are the service's counters, named as the peer's are in Prometheus.
type Stats struct {
	// limits maps a limit's full key to its *limitStats; named counts them.
	limits                             sync.Map
	named                              atomic.Int64
	configLoadSuccess, configLoadError atomic.Uint64
	redisErrors, serviceErrors         atomic.Uint64
	globalShadowMode                   atomic.Uint64
}

type limitStats struct {
	// name is the limit's stat name, as the peer writes it (an IPv4 address's dots, : and | as _).
	name                                                     string
	totalHits, overLimit, nearLimit, withinLimit, shadowMode atomic.Uint64
}

var ipv4 = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)

func statName(key string) string {
	key = strings.NewReplacer(":", "_", "|", "_").Replace(key)
	return ipv4.ReplaceAllStringFunc(key, func(ip string) string { return strings.ReplaceAll(ip, ".", "_") })
}

func newStats() *Stats { return &Stats{} }

// maxLimitStats bounds the limits counted apart: detailed_metric and value_to_metric name a
// limit by its descriptor's values, which the clients behind Envoy choose. Past it, a name not
// seen before counts in its domain's overflow series (`overflowKey`), one per domain.
const maxLimitStats = 1000

// overflowKey is the first key of a domain's overflow series (a descriptor's key of that name
// would share it).
const overflowKey = "__overflow__"

func (s *Stats) of(fullKey string) *limitStats {
	if l, ok := s.limits.Load(fullKey); ok {
		return l.(*limitStats)
	}
	// A name's place is taken before it is stored: callers side by side that each read 999
	// named 1,001 (a make test on a busy machine saw it).
	if s.named.Add(1) > maxLimitStats {
		s.named.Add(-1)
		domain, _, _ := strings.Cut(fullKey, ".")
		overflow := domain + "." + overflowKey
		l, _ := s.limits.LoadOrStore(overflow, &limitStats{name: statName(overflow)})
		return l.(*limitStats)
	}
	l, loaded := s.limits.LoadOrStore(fullKey, &limitStats{name: statName(fullKey)})
	if loaded {
		s.named.Add(-1) // another caller named it first
	}
	return l.(*limitStats)
}
