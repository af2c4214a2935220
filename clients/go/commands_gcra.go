// GCRA's calls (RATELIMIT.GCRA): built, checked and read, as src/core/args/gcra.rs reads them.

package ratelimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

func readBucket(period time.Duration) func(any) (Decision, error) {
	return func(reply any) (Decision, error) {
		n, ok := integers(reply, 5)
		if !ok {
			return Decision{}, replyError("a GCRA bucket", reply)
		}
		d := Decision{Allowed: n[0] == 0, Count: n[1] - n[2], Remaining: n[2], Limit: n[1], ResetAfter: ms(n[4]), Window: period}
		if !d.Allowed {
			d.RetryAfter = ms(n[3])
		}
		return d, nil
	}
}

// periodText is a GCRA period in decimal seconds, to the nanosecond.
func periodText(d time.Duration) string {
	text := fmt.Sprintf("%d.%09d", d/time.Second, d%time.Second)
	return strings.TrimSuffix(strings.TrimRight(text, "0"), ".")
}

// maxSpan is the module's bound on a bucket's spans in ns: half of int64.
const maxSpan = math.MaxInt64 / 2

// gcraSpans refuses a bucket whose spans in ns would pass maxSpan, as the module does.
func gcraSpans(r Rate) error {
	within := maxSpan / max(int64(r.Period)/r.PerPeriod, 1)
	if r.MaxBurst >= within {
		return invalid("(max_burst + 1) * period / tokens_per_period would cause an overflow")
	}
	tokens := cost(r.Tokens)
	if tokens > within || tokens < -within {
		return invalid("TOKENS * period / tokens_per_period would cause an overflow")
	}
	return nil
}

// gcraCall is RATELIMIT.GCRA: tokens from a GCRA bucket (smooth limiting).
func gcraCall(key string, r Rate) (command[Decision], error) {
	if r.MaxBurst < 0 {
		return command[Decision]{}, invalid("max_burst must be an integer >= 0")
	}
	if err := positive(r.PerPeriod, "tokens_per_period"); err != nil {
		return command[Decision]{}, err
	}
	if r.Period <= 0 {
		return command[Decision]{}, invalid("period must be > 0")
	}
	if err := gcraSpans(r); err != nil {
		return command[Decision]{}, err
	}
	args := []string{strconv.FormatInt(r.MaxBurst, 10), strconv.FormatInt(r.PerPeriod, 10), periodText(r.Period)}
	args = append(args, signedCost(cost(r.Tokens), "TOKENS")...)
	if r.Align {
		args = append(args, "ALIGN")
	}
	return command[Decision]{Command: "RATELIMIT.GCRA", Function: "ratelimit_gcra", Keys: []string{key}, Args: args,
		parse: readBucket(r.Period)}, nil
}

// gcraUpToCall is RATELIMIT.GCRA with PARTIAL: as many of r.Tokens as the bucket has whole, at
// least one. Granted fewer than asked, the bucket is left empty (the part of the next token goes
// with them); none, it is denied until one comes back.
func gcraUpToCall(key string, r Rate) (command[Grant], error) {
	if err := positive(cost(r.Tokens), "TOKENS"); err != nil {
		return command[Grant]{}, err
	}
	call, err := gcraCall(key, r)
	return granting(call, call.parse, 5, err)
}

// refundGCRACall is RATELIMIT.GCRA with negative tokens: the bucket's TAT moves back, never
// before now.
func refundGCRACall(key string, r Rate, n int64) (command[Decision], error) {
	back, err := amount(n)
	if err != nil {
		return command[Decision]{}, err
	}
	r.Tokens, r.Align = back, false
	return gcraCall(key, r)
}

// reserveGCRACall is RATELIMIT.GCRA with RESERVE.
func reserveGCRACall(key string, r Rate) (command[Reservation], error) {
	if r.Align {
		// A settle gives back against the running clock, not the boundaries.
		return command[Reservation]{}, invalid("ALIGN and RESERVE cannot be given together")
	}
	call, err := gcraCall(key, r)
	return reserving(call, cost(r.Tokens), "TOKENS", err)
}

// reserveGCRAUpToCall is RATELIMIT.GCRA with PARTIAL and RESERVE: as many of r.Tokens as the
// bucket has whole, at least one, and a reservation of what was granted.
func reserveGCRAUpToCall(key string, r Rate) (command[Reservation], error) {
	if r.Align {
		// A settle gives back against the running clock, not the boundaries.
		return command[Reservation]{}, invalid("ALIGN and RESERVE cannot be given together")
	}
	call, err := gcraCall(key, r)
	if err == nil && cost(r.Tokens) < 1 {
		err = invalid("PARTIAL needs TOKENS >= 1")
	}
	return reservingUpTo(call, cost(r.Tokens), call.parse, 5, err)
}
