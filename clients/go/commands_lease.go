// The leases' calls (RATELIMIT.ACQUIRE, RELEASE, RENEW), as src/core/args/lease.rs reads them.

package ratelimit

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"
)

// newLeaseID is a fresh lease id (128 random bits in hex).
func newLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

const maxIDLen = 256

func leaseID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return invalid("ID must be 1 to 256 bytes")
	}
	return nil
}

func leaseArgs(lease time.Duration) ([]string, error) {
	text, inMS, err := length(lease, "lease")
	if inMS {
		return []string{text, "MS"}, err
	}
	return []string{text}, err
}

// acquireCall is RATELIMIT.ACQUIRE: one of at most limit permits in flight, a lease under id ("":
// a new one); a retry with the same id is counted once.
func acquireCall(key string, limit int64, lease time.Duration, id string) (command[Acquisition], error) {
	if err := positive(limit, "limit"); err != nil {
		return command[Acquisition]{}, err
	}
	if id == "" {
		id = newLeaseID()
	}
	if err := leaseID(id); err != nil {
		return command[Acquisition]{}, err
	}
	leased, err := leaseArgs(lease)
	if err != nil {
		return command[Acquisition]{}, err
	}
	args := append(append([]string{strconv.FormatInt(limit, 10)}, leased...), "ID", id)
	parse := func(reply any) (Acquisition, error) {
		items, ok := reply.([]any)
		if !ok || len(items) != 5 {
			return Acquisition{}, replyError("ACQUIRE", reply)
		}
		n, ok := integers(items[:4], 4)
		if !ok {
			return Acquisition{}, replyError("ACQUIRE", reply)
		}
		held, _ := items[4].(string)
		return Acquisition{Acquired: n[0] == 1, InUse: n[1], Remaining: n[2], Wait: ms(n[3]), ID: held}, nil
	}
	return command[Acquisition]{Command: "RATELIMIT.ACQUIRE", Function: "ratelimit_acquire", Keys: []string{key},
		Args: args, parse: parse}, nil
}

// releaseCall is RATELIMIT.RELEASE: the permit under id given back; false if it was not live.
func releaseCall(key, id string) (command[bool], error) {
	if err := leaseID(id); err != nil {
		return command[bool]{}, err
	}
	parse := func(reply any) (bool, error) {
		n, ok := integer(reply)
		if !ok {
			return false, replyError("RELEASE", reply)
		}
		return n == 1, nil
	}
	return command[bool]{Command: "RATELIMIT.RELEASE", Function: "ratelimit_release", Keys: []string{key},
		Args: []string{id}, parse: parse}, nil
}

// renewCall is RATELIMIT.RENEW: the live lease under id extended to lease from now; the lease it
// now has, or 0 when it was lost (stop, or acquire again).
func renewCall(key, id string, lease time.Duration) (command[time.Duration], error) {
	if err := leaseID(id); err != nil {
		return command[time.Duration]{}, err
	}
	leased, err := leaseArgs(lease)
	if err != nil {
		return command[time.Duration]{}, err
	}
	parse := func(reply any) (time.Duration, error) {
		n, ok := integer(reply)
		if !ok {
			return 0, replyError("RENEW", reply)
		}
		if n < 0 {
			return 0, nil
		}
		return ms(n), nil
	}
	return command[time.Duration]{Command: "RATELIMIT.RENEW", Function: "ratelimit_renew", Keys: []string{key},
		Args: append([]string{id}, leased...), parse: parse}, nil
}
