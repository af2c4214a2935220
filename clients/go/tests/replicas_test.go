package tests

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/tests/servers"
)

// stopped stops a server's process until the returned function (also the test's cleanup) resumes
// it: a replica that acknowledges nothing meanwhile.
func stopped(t *testing.T, s *servers.Server) (resume func()) {
	t.Helper()
	if err := syscall.Kill(s.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resume = func() { _ = syscall.Kill(s.Pid(), syscall.SIGCONT) }
	t.Cleanup(resume)
	return resume
}

// A limiter made WithReplicas answers a write once a replica has it, and says when none did in
// time (the answer beside ErrNotReplicated), through every client; reads send no WAIT; a hot
// limit uses no block a replica did not acknowledge.
func TestWritesWaitForReplicas(t *testing.T) {
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			primary, replica := start(t, kind, options{}), start(t, kind, options{})
			if err := replica.ReplicaOf(primary, false); err != nil {
				t.Fatal(err)
			}
			// Patient where a replica should answer (at once, on an idle machine), impatient where
			// none can.
			waiting := clients(t, []string{primary.Addr()}, false, ratelimit.WithReplicas(1, 10*time.Second))
			impatient := clients(t, []string{primary.Addr()}, false, ratelimit.WithReplicas(1, 50*time.Millisecond))
			plain := clients(t, []string{primary.Addr()}, false)
			ctx := context.Background()
			fixed := ratelimit.Fixed{Limit: 10, Window: time.Minute}
			for name, l := range waiting {
				if name == "go-redis Ring" {
					_, err := l.Hit(ctx, "ring", fixed)
					if !errors.Is(err, ratelimit.ErrInvalidArgument) {
						t.Errorf("%s: a Ring waited for replicas: %v", name, err)
					}
					continue
				}
				if d, err := l.Hit(ctx, name, fixed); err != nil || !d.Allowed {
					t.Errorf("%s: %+v %v", name, d, err)
				}
			}
			resume := stopped(t, replica)
			for name, l := range impatient {
				if name == "go-redis Ring" {
					continue
				}
				began := time.Now()
				d, err := l.Hit(ctx, name, fixed)
				var late *ratelimit.NotReplicatedError
				if !errors.As(err, &late) || !errors.Is(err, ratelimit.ErrNotReplicated) || late.Acknowledged != 0 || late.Wanted != 1 {
					t.Errorf("%s: a write no replica acknowledged: %v", name, err)
				}
				// The answer stands beside the error: the write was made on the primary.
				if !d.Allowed || d.Count != 2 {
					t.Errorf("%s: %+v", name, d)
				}
				if waited := time.Since(began); waited < 50*time.Millisecond {
					t.Errorf("%s: WAIT 1 50 answered in %v with the replica stopped", name, waited)
				}
				if _, err := l.Peek(ctx, name, 10, 1); err != nil {
					t.Errorf("%s: a read waited for replicas: %v", name, err)
				}
				if _, err := plain[name].Hit(ctx, name, fixed); err != nil {
					t.Errorf("%s: a limiter without WithReplicas waited: %v", name, err)
				}
			}
			// A hot limit takes nothing from a block no replica acknowledged (a failover could
			// lose it), and takes again once the replica is back.
			shared := ratelimit.Fixed{Limit: 1000, Window: time.Minute}
			hot := impatient["rueidis"].Hot("hot", shared, ratelimit.HotOptions{})
			if ok, err := hot.Take(ctx, 1); ok || !errors.Is(err, ratelimit.ErrNotReplicated) {
				t.Errorf("a hot limit took from an unreplicated block: %v %v", ok, err)
			}
			open := impatient["rueidis"].Hot("hot open", shared, ratelimit.HotOptions{FailOpen: true})
			if ok, err := open.Take(ctx, 1); !ok || !errors.Is(err, ratelimit.ErrNotReplicated) {
				t.Errorf("FailOpen did not admit beside an unreplicated block: %v %v", ok, err)
			}
			resume()
			again := waiting["rueidis"].Hot("hot", shared, ratelimit.HotOptions{})
			if ok, err := again.Take(ctx, 1); !ok || err != nil {
				t.Errorf("a hot limit once the replica is back: %v %v", ok, err)
			}
			for _, h := range []*ratelimit.HotLimit{hot, open, again} {
				_ = h.Close(ctx)
			}
		})
	}
}

// In a cluster each write waits on its key's primary: a key whose primary has a replica is
// answered, a key whose primary has none is not, whatever node a client would pick for a keyless
// WAIT.
func TestWritesWaitOnTheirKeysPrimaryInACluster(t *testing.T) {
	nodes := startCluster(t, "module")
	replica := start(t, "module", options{cluster: true})
	if err := replica.ReplicaOf(nodes[0], true); err != nil {
		t.Fatal(err)
	}
	// "a" hashes to slot 15495 (the second node's), "b" to 3300 (the first's, which has the replica).
	ctx := context.Background()
	fixed := ratelimit.Fixed{Limit: 10, Window: time.Minute}
	addrs := []string{nodes[0].Addr(), nodes[1].Addr()}
	impatient := clients(t, addrs, true, ratelimit.WithReplicas(1, 50*time.Millisecond))
	for name, l := range clients(t, addrs, true, ratelimit.WithReplicas(1, 10*time.Second)) {
		for range 5 {
			if _, err := l.Hit(ctx, "b", fixed); err != nil {
				t.Errorf("%s: the key whose primary has a replica: %v", name, err)
			}
			if _, err := impatient[name].Hit(ctx, "a", fixed); !errors.Is(err, ratelimit.ErrNotReplicated) {
				t.Errorf("%s: the key whose primary has no replica: %v", name, err)
			}
		}
	}
}
