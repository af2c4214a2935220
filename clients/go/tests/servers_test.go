// Real servers for the tests: the server binary REDIS_SERVER names (default redis-server) on a
// free loopback port, with the module RATELIMIT_MODULE names loaded, or without it (the clients
// then load the Functions library). A two-node cluster, and a server whose wall clock the test
// stands (testkit/clock/clock.c, preloaded), for the tests that need them.
package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kind is how a server answers: the module, or the Functions library the client loads.
type Kind string

var kinds = []Kind{"module", "library"}

type Server struct {
	Port int
	dir  string
	cmd  *exec.Cmd
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

type options struct {
	cluster bool
	clock   string // the clock file, for a server whose time the test stands
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func serverBinary() string {
	if b := os.Getenv("REDIS_SERVER"); b != "" {
		return b
	}
	return "redis-server"
}

func modulePath(t *testing.T) string {
	t.Helper()
	if m := os.Getenv("RATELIMIT_MODULE"); m != "" {
		return m
	}
	m, _ := filepath.Abs("../../../target/release/libredis_ratelimit.so")
	if _, err := os.Stat(m); err != nil {
		t.Fatalf("no module: set RATELIMIT_MODULE or run cargo build --release (%v)", err)
	}
	return m
}

// start runs a server until the test ends; a port another process took first is tried again.
func start(t *testing.T, kind Kind, o options) *Server {
	t.Helper()
	for attempt := 0; ; attempt++ {
		s, err := tryStart(t, kind, o)
		if err == nil {
			return s
		}
		if attempt == 4 {
			t.Fatal(err)
		}
	}
}

func tryStart(t *testing.T, kind Kind, o options) (*Server, error) {
	s := &Server{Port: freePort(t), dir: t.TempDir()}
	args := []string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.dir, "--save", "",
		"--appendonly", "no", "--enable-debug-command", "yes"}
	if kind == "module" {
		args = append(args, "--loadmodule", modulePath(t))
	}
	if o.cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-announce-ip", "127.0.0.1")
	}
	s.cmd = exec.Command(serverBinary(), args...)
	if o.clock != "" {
		s.cmd.Env = append(os.Environ(), "LD_PRELOAD="+clockLibrary(t), "RATELIMIT_TEST_CLOCK="+o.clock)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-exited
	})
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer rdb.Close()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			return nil, fmt.Errorf("%s exited before it answered on %d", serverBinary(), s.Port)
		default:
		}
		info, err := rdb.Info(context.Background(), "server").Result()
		if err == nil {
			if !strings.Contains(info, "process_id:"+strconv.Itoa(s.cmd.Process.Pid)) {
				return nil, fmt.Errorf("another server answers on %d", s.Port)
			}
			return s, nil
		}
	}
	return nil, fmt.Errorf("%s did not answer on %d", serverBinary(), s.Port)
}

// startCluster is a two-primary cluster: slots 0-8191 on the first node, the rest on the second.
func startCluster(t *testing.T, kind Kind) []*Server {
	t.Helper()
	ctx := context.Background()
	nodes := []*Server{start(t, kind, options{cluster: true}), start(t, kind, options{cluster: true})}
	for i, node := range nodes {
		rdb := redis.NewClient(&redis.Options{Addr: node.Addr()})
		first := strconv.Itoa(i * 8192)
		last := strconv.Itoa(i*8192 + 8191)
		if err := rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", first, last).Err(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := rdb.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(nodes[1].Port)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		rdb.Close()
	}
	for _, node := range nodes {
		rdb := redis.NewClient(&redis.Options{Addr: node.Addr()})
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			info, _ := rdb.ClusterInfo(ctx).Result()
			shards, _ := rdb.ClusterShards(ctx).Result()
			if strings.Contains(info, "cluster_state:ok") && len(shards) == 2 && len(shards[0].Slots) > 0 && len(shards[1].Slots) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cluster did not form: %s", info)
			}
		}
		rdb.Close()
	}
	return nodes
}

// clockLibrary is testkit/clock/clock.c, built once per test binary.
var clockLibrary = func() func(t *testing.T) string {
	var once sync.Once
	var built string
	var failed error
	return func(t *testing.T) string {
		t.Helper()
		once.Do(func() {
			dir, err := os.MkdirTemp("", "ratelimit-go-clock-")
			if err != nil {
				failed = err
				return
			}
			built = filepath.Join(dir, "libclock.so")
			out, err := exec.Command("cc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", built,
				"../../../testkit/clock/clock.c").CombinedOutput()
			if err != nil {
				failed = fmt.Errorf("cc: %v: %s", err, out)
			}
		})
		if failed != nil {
			t.Fatal(failed)
		}
		return built
	}
}()

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

// Stop ends the server now (its cleanup then finds it gone).
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	for i := 0; i < 200; i++ {
		conn, err := net.DialTimeout("tcp", s.Addr(), 50*time.Millisecond)
		if err != nil {
			return
		}
		conn.Close()
		time.Sleep(10 * time.Millisecond)
	}
}
