package service

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/envoy/internal/config"
)

// uncapped is the limit HIT is given where the service decides, as the peer does, from the count:
// every hit counts, admitted or not, and the counter gets its expiry in the same step. Below
// 2^53: a number the Functions library's Lua holds exactly.
const uncapped = 1<<53 - 1

// check is one limited descriptor of a request: what to send, and what came back.
type check struct {
	limit  *config.Limit
	key    string
	addend int64
	// count is the counter after the call where the service decides (the peer's way).
	count int64
	// byServer: the module decided (sliding, GCRA, all or nothing): allowed and remaining are its.
	byServer  bool
	allowed   bool
	remaining int64
	// resetAfter is the window's end as the server gave it (calendar, sliding, GCRA windows).
	resetAfter time.Duration
	err        error
}

// key is a descriptor's counter: the peer's key (prefix, domain, each entry's key and value, the
// window's start) for its fixed windows, so that both count the same keys, and a key of the
// same shape naming the algorithm for ours.
func (s *Service) key(domain string, d *rlv3.RateLimitDescriptor, l *config.Limit, now int64) string {
	var b strings.Builder
	b.WriteString(s.settings.CacheKeyPrefix)
	if s.tagDomain {
		b.WriteString("{" + domain + "}")
	} else {
		b.WriteString(domain)
	}
	b.WriteByte('_')
	for i, entry := range d.Entries {
		b.WriteString(entry.Key)
		b.WriteByte('_')
		if i < len(l.ShareThreshold) && l.ShareThreshold[i] != "" {
			b.WriteString(l.ShareThreshold[i])
		} else {
			b.WriteString(entry.Value)
		}
		b.WriteByte('_')
	}
	seconds := config.Seconds(l.Unit)
	switch {
	case l.Algorithm != config.Fixed:
		b.WriteString(string(l.Algorithm) + strconv.FormatInt(seconds, 10))
	case l.TimeZone != "":
		b.WriteString(strings.ToLower(l.Unit.String()) + "@" + l.TimeZone)
	default:
		b.WriteString(strconv.FormatInt(now/seconds*seconds, 10))
	}
	return b.String()
}

func window(l *config.Limit) time.Duration {
	return time.Duration(config.Seconds(l.Unit)) * time.Second
}

func calendar(l *config.Limit) ratelimit.Calendar {
	return ratelimit.Calendar(strings.ToLower(l.Unit.String()))
}

// fixed is a fixed window of l, with the cost and limit given.
func fixed(l *config.Limit, limit, cost int64) ratelimit.Fixed {
	if l.TimeZone != "" {
		return ratelimit.Fixed{Limit: limit, Calendar: calendar(l), TZ: l.TimeZone, Cost: cost}
	}
	return ratelimit.Fixed{Limit: limit, Window: window(l), Align: true, Cost: cost}
}

// one decides a check on its own.
func (c *check) one(ctx context.Context, rl *ratelimit.Limiter) {
	l := c.limit
	var d ratelimit.Decision
	switch {
	case l.Algorithm == config.Sliding && c.addend == 0:
		d, c.err = rl.SlidePeek(ctx, c.key, ratelimit.Sliding{Limit: int64(l.RequestsPerUnit), Window: window(l)})
		c.byServer, c.allowed = true, true
	case l.Algorithm == config.Sliding:
		d, c.err = rl.Slide(ctx, c.key, ratelimit.Sliding{Limit: int64(l.RequestsPerUnit), Window: window(l), Cost: c.addend})
		c.byServer, c.allowed = true, d.Allowed
	case l.Algorithm == config.GCRA && c.addend == 0:
		// A bucket has no look that takes nothing: the check passes, as a count of 0 would.
		c.byServer, c.allowed, c.remaining = true, true, int64(l.RequestsPerUnit)
		return
	case l.Algorithm == config.GCRA:
		n := int64(l.RequestsPerUnit)
		d, c.err = rl.GCRA(ctx, c.key, ratelimit.Rate{MaxBurst: n - 1, PerPeriod: n, Period: window(l), Tokens: c.addend})
		c.byServer, c.allowed = true, d.Allowed
	case c.addend == 0:
		d, c.err = rl.Peek(ctx, c.key, uncapped, 1)
	default:
		d, c.err = rl.Hit(ctx, c.key, fixed(l, uncapped, c.addend))
	}
	c.count, c.remaining, c.resetAfter = d.Count, d.Remaining, d.ResetAfter
}

// together decides checks in one HITALL, all of one cost and zone. Capped (all or nothing,
// AllOrNothing): each limit its own, and a limit of 0 admits nothing, so that then none is
// counted and each is only looked at. Uncapped: every hit counts, as separate HITs would count
// it, and the service decides from each count; one call whatever the number of descriptors.
func together(ctx context.Context, rl *ratelimit.Limiter, checks []*check, capped bool) {
	limits := make([]ratelimit.Limit, len(checks))
	blocked := false
	for i, c := range checks {
		l := c.limit
		limits[i] = ratelimit.Limit{Key: c.key, Limit: uncapped}
		if capped {
			limits[i].Limit = int64(l.RequestsPerUnit)
		}
		if l.TimeZone != "" {
			limits[i].Calendar = calendar(l)
		} else {
			limits[i].Window = window(l)
		}
		blocked = blocked || limits[i].Limit == 0
	}
	if blocked {
		for _, c := range checks {
			d, err := rl.Peek(ctx, c.key, uncapped, 1)
			c.byServer, c.allowed, c.err = true, c.limit.RequestsPerUnit > 0 && d.Count <= int64(c.limit.RequestsPerUnit), err
			c.count, c.remaining, c.resetAfter = d.Count, max(0, int64(c.limit.RequestsPerUnit)-d.Count), d.ResetAfter
		}
		return
	}
	first := checks[0]
	m, err := rl.HitAll(ctx, limits, ratelimit.AllOptions{Cost: first.addend, Align: true, TZ: first.limit.TimeZone})
	for i, c := range checks {
		c.byServer, c.err = capped, err
		if err == nil {
			d := m.Decisions[i]
			c.allowed, c.count, c.remaining, c.resetAfter = d.Allowed, d.Count, d.Remaining, d.ResetAfter
		}
	}
}

// decide sends a request's checks, at once (the client pipelines them: one round trip), and
// waits for every answer. Fixed windows counted at one cost and zone go in one HITALL (capped or
// not: see together), uncapped ones with other requests' where they can (batcher). A key named twice in a request is counted in the request's order, as the
// peer's pipeline counts it: then the calls go one after the other.
func (s *Service) decide(ctx context.Context, rl *ratelimit.Limiter, checks []*check) {
	var groups [][]*check
	byShape, keys := map[string]int{}, map[string]bool{}
	repeated := false
	for _, c := range checks {
		repeated = repeated || keys[c.key]
		keys[c.key] = true
		if !s.groups(c) || repeated {
			groups = append(groups, []*check{c})
			continue
		}
		shape := strconv.FormatBool(s.capped(c)) + strconv.FormatInt(c.addend, 10) + "@" + c.limit.TimeZone
		if i, seen := byShape[shape]; seen {
			groups[i] = append(groups[i], c)
		} else {
			byShape[shape] = len(groups)
			groups = append(groups, []*check{c})
		}
	}
	run := func(group []*check) {
		switch capped := s.capped(group[0]); {
		case !capped && s.batches(group[0]):
			s.batch.decide(ctx, rl, group)
		case capped || len(group) > 1:
			together(ctx, rl, group, capped)
		default:
			group[0].one(ctx, rl)
		}
	}
	if repeated || len(groups) == 1 {
		for _, group := range groups {
			run(group)
		}
		return
	}
	var wg sync.WaitGroup
	for _, group := range groups[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(group)
		}()
	}
	run(groups[0])
	wg.Wait()
}

// groups reports whether c can be decided in one HITALL with the request's others: a counted
// fixed window, where the request's keys share a slot (not on a cluster, or with the domain as
// their hash tag).
func (s *Service) groups(c *check) bool {
	return c.limit.Algorithm == config.Fixed && c.addend > 0 && (s.settings.RedisType != "cluster" || s.tagDomain)
}

// batches reports whether c, uncapped, is counted with other requests' checks in one HITALL
// (batcher): where any request's keys share a call, off a cluster.
func (s *Service) batches(c *check) bool {
	return s.groups(c) && s.settings.RedisType != "cluster"
}

// capped reports whether c is decided all or nothing with the request's others, by the server:
// with REDIS_RATELIMIT_ALL_OR_NOTHING, not in shadow mode.
func (s *Service) capped(c *check) bool {
	return s.settings.AllOrNothing && !c.limit.ShadowMode && s.groups(c)
}
