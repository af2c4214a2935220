// Package servers starts real servers for the Go tests and the bench: the binary REDIS_SERVER
// names (default redis-server) on a free loopback port, with the module RATELIMIT_MODULE names
// loaded, or without it; a node of a cluster, or a server whose wall clock a file stands
// (testkit/clock/clock.c, preloaded).
package servers

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
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options for a server.
type Options struct {
	// Binary is the server (default: REDIS_SERVER, else redis-server).
	Binary string
	// Module is the module to load ("": none, the clients load the Functions library).
	Module  string
	Cluster bool
	// Clock is the file the server's wall clock reads (see testkit/clock/clock.c), or "".
	Clock string
}

// Server is one running server.
type Server struct {
	Port   int
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Binary is the server binary REDIS_SERVER names, else redis-server.
func Binary() string {
	if b := os.Getenv("REDIS_SERVER"); b != "" {
		return b
	}
	return "redis-server"
}

// Module is the module RATELIMIT_MODULE names, else the repository's release build.
func Module() (string, error) {
	if m := os.Getenv("RATELIMIT_MODULE"); m != "" {
		return m, nil
	}
	m, _ := filepath.Abs("../../../target/release/libredis_ratelimit.so")
	_, err := os.Stat(m)
	return m, err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start runs a server; a port another process took first is tried again.
func Start(o Options) (*Server, error) {
	if o.Binary == "" {
		o.Binary = Binary()
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var s *Server
		if s, err = try(o); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func try(o Options) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ratelimit-go-server-")
	if err != nil {
		return nil, err
	}
	s := &Server{Port: port, dir: dir, exited: make(chan struct{})}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no"}
	if o.Module != "" {
		// Absolute: the server moves into --dir before it loads the module.
		module, err := filepath.Abs(o.Module)
		if err != nil {
			return nil, err
		}
		args = append(args, "--loadmodule", module)
	}
	if o.Cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-announce-ip", "127.0.0.1")
	}
	s.cmd = exec.Command(o.Binary, args...)
	// Killed with this process too: a test binary that times out runs no cleanup.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if o.Clock != "" {
		library, err := clockLibrary()
		if err != nil {
			return nil, err
		}
		s.cmd.Env = append(os.Environ(), "LD_PRELOAD="+library, "RATELIMIT_TEST_CLOCK="+o.Clock)
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer rdb.Close()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-s.exited:
			s.Stop()
			return nil, fmt.Errorf("%s exited before it answered on %d", o.Binary, port)
		default:
		}
		// Dialled first by hand: go-redis logs every refused dial.
		conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err != nil {
			continue
		}
		conn.Close()
		info, err := rdb.Info(context.Background(), "server").Result()
		if err == nil {
			if !strings.Contains(info, "process_id:"+strconv.Itoa(s.Pid())+"\r") {
				s.Stop()
				return nil, fmt.Errorf("another server answers on %d", port)
			}
			return s, nil
		}
	}
	s.Stop()
	return nil, fmt.Errorf("%s did not answer on %d", o.Binary, port)
}

// ReplicaOf makes s a replica of primary (in a cluster formed by Cluster, s started with Cluster
// too: its replica in the cluster), and waits until it has the primary's data.
func (s *Server) ReplicaOf(primary *Server, cluster bool) error {
	ctx := context.Background()
	p := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	// The full sync at once, not after the 5 s a primary waits by default for more replicas.
	err := p.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err()
	p.Close()
	if err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	if !cluster {
		err = rdb.Do(ctx, "REPLICAOF", "127.0.0.1", primary.Port).Err()
	} else if err = rdb.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(primary.Port)).Err(); err == nil {
		err = replicate(ctx, rdb, primary)
	}
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		info, err := rdb.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return nil
		}
	}
	return fmt.Errorf("the replica on %d did not reach its primary on %d", s.Port, primary.Port)
}

// replicate is CLUSTER REPLICATE of primary's id, once rdb's node has met it.
func replicate(ctx context.Context, rdb *redis.Client, primary *Server) error {
	p := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	defer p.Close()
	id, err := p.ClusterMyID(ctx).Result()
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := rdb.Do(ctx, "CLUSTER", "REPLICATE", id).Err()
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// Stop ends the server and removes its folder.
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	_ = os.RemoveAll(s.dir)
}

// Cluster forms a cluster of nodes started with Cluster: the slots split evenly among them.
func Cluster(nodes []*Server) error {
	ctx := context.Background()
	per := 16384 / len(nodes)
	for i, node := range nodes {
		rdb := redis.NewClient(&redis.Options{Addr: node.Addr()})
		last := (i+1)*per - 1
		if i == len(nodes)-1 {
			last = 16383
		}
		// Distinct epochs up front: two nodes meeting at epoch 0 settle it between them first.
		err := rdb.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)).Err()
		if err == nil {
			err = rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(i*per), strconv.Itoa(last)).Err()
		}
		if err == nil && i > 0 {
			err = rdb.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(nodes[0].Port)).Err()
		}
		rdb.Close()
		if err != nil {
			return err
		}
	}
	for _, node := range nodes {
		rdb := redis.NewClient(&redis.Options{Addr: node.Addr()})
		formed := false
		for deadline := time.Now().Add(30 * time.Second); !formed && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			info, _ := rdb.ClusterInfo(ctx).Result()
			shards, _ := rdb.ClusterShards(ctx).Result()
			formed = strings.Contains(info, "cluster_state:ok") && len(shards) == len(nodes)
			for _, shard := range shards {
				formed = formed && len(shard.Slots) > 0
			}
		}
		rdb.Close()
		if !formed {
			return fmt.Errorf("the cluster did not form on %s", node.Addr())
		}
	}
	return nil
}

// clockLibrary is testkit/clock/clock.c, built once per process.
var clockLibrary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "ratelimit-go-clock-")
	if err != nil {
		return "", err
	}
	built := filepath.Join(dir, "libclock.so")
	source, _ := filepath.Abs("../../../testkit/clock/clock.c")
	out, err := exec.Command("cc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", built, source).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("cc: %v: %s", err, out)
	}
	return built, nil
})

// Name is the server's kind and version, as INFO gives them ("Valkey 9.1.2", "Redis 7.0.15"; "?"
// when it does not answer).
func (s *Server) Name() string {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	info, _ := rdb.Info(context.Background(), "server").Result()
	for _, field := range []struct{ prefix, kind string }{{"valkey_version:", "Valkey "}, {"redis_version:", "Redis "}} {
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, field.prefix); ok {
				return field.kind + v
			}
		}
	}
	return "?"
}

// CPUModel is this machine's processor, as /proc/cpuinfo names it, for the benches' reports.
func CPUModel() string {
	text, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "model name") {
			return strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
		}
	}
	return "unknown CPU"
}
