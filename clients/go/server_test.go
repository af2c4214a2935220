package ratelimit_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// The examples run against a real server with the module: REDIS_SERVER's binary (default
// redis-server) with RATELIMIT_MODULE's module (default the repository's release build), started
// here on a free loopback port. Where neither is given and the defaults are missing (this module
// tested from the module cache), the examples are skipped with a note; the unit tests run anyway.
var server string

func TestMain(m *testing.M) {
	flag.Parse()
	stop, err := startServer()
	if err != nil {
		if os.Getenv("RATELIMIT_MODULE") != "" || os.Getenv("REDIS_SERVER") != "" {
			fmt.Fprintln(os.Stderr, "ratelimit: no server for the examples:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "ratelimit: the examples are skipped, no server with the module:", err)
		_ = flag.Set("test.run", "^Test")
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

func startServer() (stop func(), err error) {
	binary := os.Getenv("REDIS_SERVER")
	if binary == "" {
		binary = "redis-server"
	}
	module := os.Getenv("RATELIMIT_MODULE")
	if module == "" {
		module, _ = filepath.Abs("../../target/release/libredis_ratelimit.so")
	}
	if _, err := os.Stat(module); err != nil {
		return func() {}, err
	}
	dir, err := os.MkdirTemp("", "ratelimit-examples-")
	if err != nil {
		return func() {}, err
	}
	// A port another process takes between our look and the server's bind: try another.
	for attempt := 0; attempt < 5; attempt++ {
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return func() {}, err
		}
		addr := listener.Addr().String()
		_ = listener.Close()
		_, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command(binary, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--loadmodule", module)
		if err := cmd.Start(); err != nil {
			return func() {}, err
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop = func() { _ = cmd.Process.Kill(); <-exited; _ = os.RemoveAll(dir) }
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			select {
			case <-exited:
				deadline = time.Time{} // it did not start (the port was taken): the next port
				continue
			default:
			}
			if c, err := dial(addr); err == nil {
				reply, err := c.Do(context.Background(), 0, []string{"PING"})
				_ = c.conn.Close()
				if err == nil && reply == "PONG" {
					server = addr
					return stop, nil
				}
			}
		}
		stop()
		dir, _ = os.MkdirTemp("", "ratelimit-examples-")
	}
	return func() {}, errors.New(binary + " did not start with " + module)
}

// newLimiter is a Limiter on the examples' server, emptied first. A program of yours makes it
// with an adapter over its Redis client: rlgoredis.New(rdb), rlrueidis.New(client) ...
func newLimiter() *ratelimit.Limiter {
	c, err := dial(server)
	if err != nil {
		panic(err)
	}
	if _, err := c.Do(context.Background(), 0, []string{"FLUSHALL"}); err != nil {
		panic(err)
	}
	return ratelimit.New(c)
}

// respConn is a ratelimit.Conn over one TCP connection speaking RESP2 to one server: all that an
// adapter does, here without a client library (this module depends on none).
type respConn struct {
	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
}

func dial(addr string) (*respConn, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	return &respConn{conn: conn, r: bufio.NewReader(conn)}, nil
}

func (c *respConn) Do(ctx context.Context, _ int, args []string) (any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	deadline, _ := ctx.Deadline()
	if err := c.conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		return nil, err
	}
	return c.read()
}

func (c *respConn) read() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("an empty RESP line")
	}
	kind, text := line[0], line[1:]
	switch kind {
	case '+':
		return text, nil
	case '-':
		return nil, &ratelimit.ServerError{Message: text}
	case ':':
		return strconv.ParseInt(text, 10, 64)
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < 0 {
		return nil, err
	}
	switch kind {
	case '$':
		data := make([]byte, n+2)
		_, err := io.ReadFull(c.r, data)
		return string(data[:n]), err
	case '*':
		// Every item is read, an error among them too, so that the next reply starts where it should.
		items, failed := make([]any, n), error(nil)
		for i := range items {
			var server *ratelimit.ServerError
			if items[i], err = c.read(); errors.As(err, &server) {
				failed = err
			} else if err != nil {
				return nil, err
			}
		}
		return items, failed
	}
	return nil, fmt.Errorf("an unknown RESP type %q", kind)
}

func (c *respConn) EachPrimary(_ context.Context, fn func(ratelimit.Conn) error) error { return fn(c) }

func (c *respConn) Cluster() bool { return false }
