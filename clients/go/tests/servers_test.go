// The tests' servers (package servers), stopped when the test ends, and the test clock.
package tests

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/tests/servers"
	"github.com/redis/go-redis/v9"
)

// Kind is how a server answers: the module, or the Functions library the client loads.
type Kind string

var kinds = []Kind{"module", "library"}

type options struct {
	cluster bool
	clock   string // the clock file, for a server whose time the test stands
}

func start(t *testing.T, kind Kind, o options) *servers.Server {
	t.Helper()
	so := servers.Options{Cluster: o.cluster, Clock: o.clock}
	if kind == "module" {
		module, err := servers.Module()
		if err != nil {
			t.Fatalf("no module: set RATELIMIT_MODULE or run cargo build --release (%v)", err)
		}
		so.Module = module
	}
	s, err := servers.Start(so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// startCluster is a two-primary cluster: slots 0-8191 on the first node, the rest on the second.
func startCluster(t *testing.T, kind Kind) []*servers.Server {
	t.Helper()
	nodes := []*servers.Server{start(t, kind, options{cluster: true}), start(t, kind, options{cluster: true})}
	if err := servers.Cluster(nodes); err != nil {
		t.Fatal(err)
	}
	return nodes
}

// testClock is the wall clock of the servers started with it, frozen at a Unix ms the test sets.
type testClock struct{ file string }

func newClock(t *testing.T, unixMS int64) *testClock {
	c := &testClock{file: filepath.Join(t.TempDir(), "clock")}
	c.set(t, unixMS)
	return c
}

// set stands the clock at unixMS (written whole: the server never reads half a number) and waits
// until the server at rdb reads it, when given.
func (c *testClock) set(t *testing.T, unixMS int64, rdb ...*redis.Client) {
	t.Helper()
	next := c.file + ".next"
	if err := os.WriteFile(next, []byte(strconv.FormatInt(unixMS, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, c.file); err != nil {
		t.Fatal(err)
	}
	for _, r := range rdb {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			now, err := r.Time(context.Background()).Result()
			if err == nil && now.UnixMilli() >= unixMS {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server does not read the test clock (%v)", err)
			}
		}
	}
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
