// Package envoy_test runs the rate limit service (clients/go/envoy) and envoyproxy/ratelimit
// itself as processes, on real servers, and talks to both over gRPC with go-control-plane's
// types: what Envoy sends and reads.
package envoy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/tests/servers"
)

// The two services' binaries and the peer's source (its test/config files), from the Makefile.
var (
	ourBinary  = os.Getenv("ENVOY_SERVICE")
	peerBinary = os.Getenv("ENVOY_PEER")
	peerSource = os.Getenv("ENVOY_PEER_SOURCE")
)

func TestMain(m *testing.M) {
	if ourBinary == "" || peerBinary == "" || peerSource == "" {
		fmt.Fprintln(os.Stderr, "ENVOY_SERVICE, ENVOY_PEER and ENVOY_PEER_SOURCE must name the service, envoyproxy/ratelimit's service_cmd and its source: run make go-test")
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// service is one running rate limit service.
type service struct {
	name       string
	cmd        *exec.Cmd
	exited     chan struct{}
	grpcPort   int
	httpPort   int
	debugPort  int
	log        *lockedBuffer
	client     pb.RateLimitServiceClient
	conn       *grpc.ClientConn
	stopOnce   sync.Once
	waitErr    error
	runtimeDir string
	configDir  string
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// handedOut are the ports freePorts gave: never twice in one test binary, since the services of
// parallel tests start at once (and the peer binds with SO_REUSEPORT: a port taken twice would
// not even fail).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	var ports []int
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			ports = append(ports, port)
		}
	}
	return ports
}

// options are a service's: its Redis, its configuration files (name: text), its environment.
type options struct {
	binary string
	redis  string
	// redisType is SINGLE unless set (CLUSTER: redis lists the nodes).
	redisType string
	files     map[string]string
	env       []string
	// unhealthy: do not wait for /healthcheck to answer 200.
	unhealthy bool
}

// start runs a service on free loopback ports, its files in RUNTIME_ROOT/ratelimit/config, and
// waits until it answers on every port.
func start(t testing.TB, o options) *service {
	t.Helper()
	for attempt := 0; ; attempt++ {
		s, err := try(t, o)
		if err == nil {
			return s
		}
		if attempt == 4 {
			t.Fatal(err)
		}
	}
}

func try(t testing.TB, o options) (*service, error) {
	runtime := t.TempDir()
	configDir := filepath.Join(runtime, "ratelimit", "config")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range o.files {
		if err := os.WriteFile(filepath.Join(configDir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ports := freePorts(t, 3)
	redisType := o.redisType
	if redisType == "" {
		redisType = "SINGLE"
	}
	s := &service{name: filepath.Base(o.binary), exited: make(chan struct{}), httpPort: ports[0], grpcPort: ports[1], debugPort: ports[2],
		log: &lockedBuffer{}, runtimeDir: runtime, configDir: configDir}
	s.cmd = exec.Command(o.binary)
	s.cmd.Env = append(os.Environ(),
		"HOST=127.0.0.1", "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
		"PORT="+strconv.Itoa(s.httpPort), "GRPC_PORT="+strconv.Itoa(s.grpcPort), "DEBUG_PORT="+strconv.Itoa(s.debugPort),
		"RUNTIME_ROOT="+runtime, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE="+redisType, "REDIS_URL="+o.redis,
		"USE_STATSD=false", "LOG_LEVEL=info", "EXPIRATION_JITTER_MAX_SECONDS=0")
	s.cmd.Env = append(s.cmd.Env, o.env...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.waitErr = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(s.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("%s exited before it answered: %v\n%s", s.name, s.waitErr, s.log)
		default:
		}
		status, _ := s.get("/healthcheck", s.httpPort)
		debug, _ := s.get("/rlconfig", s.debugPort)
		grpcUp := dials(s.grpcPort)
		if (status == http.StatusOK || o.unhealthy && status != 0) && debug == http.StatusOK && grpcUp {
			break
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not answer on its ports (health %d): %s", s.name, status, s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(s.grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s.conn, s.client = conn, pb.NewRateLimitServiceClient(conn)
	return s, nil
}

func dials(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

func (s *service) get(path string, port int) (int, string) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(port) + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (s *service) post(path, body string) (int, string) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Post("http://127.0.0.1:"+strconv.Itoa(s.httpPort)+path, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(text)
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 15 s).
func (s *service) stop() {
	s.stopOnce.Do(func() {
		if s.conn != nil {
			s.conn.Close()
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
}

// ask sends one request.
func (s *service) ask(t testing.TB, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.client.ShouldRateLimit(ctx, req)
}

// request is a request in domain of descriptors, each a list of key, value pairs.
func request(domain string, addend uint32, descriptors ...[]string) *pb.RateLimitRequest {
	req := &pb.RateLimitRequest{Domain: domain, HitsAddend: addend}
	for _, pairs := range descriptors {
		req.Descriptors = append(req.Descriptors, descriptorOf(pairs))
	}
	return req
}

// descriptorOf is a descriptor of key, value pairs.
func descriptorOf(pairs []string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(pairs); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: pairs[i], Value: pairs[i+1]})
	}
	return d
}

// redisServer starts a server: with the module, or without (the service loads the library;
// envoyproxy/ratelimit needs neither).
func redisServer(t testing.TB, module bool) *servers.Server {
	t.Helper()
	o := servers.Options{}
	if module {
		m, err := servers.Module()
		if err != nil {
			t.Fatal(err)
		}
		o.Module = m
	}
	s, err := servers.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}
