package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// held is a Conn to the examples' server whose calls wait, when asked to, until let go (a server
// slow to answer, or gone), and that counts the backend's probes.
type held struct {
	ratelimit.Conn
	probes atomic.Int64
	mu     sync.Mutex
	gate   chan struct{} // nil: calls go through
}

func (h *held) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gate = make(chan struct{})
}

func (h *held) let() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.gate)
	h.gate = nil
}

func (h *held) Do(ctx context.Context, keyPos int, args []string) (any, error) {
	if len(args) == 1 && args[0] == "RATELIMIT.PEEK" {
		h.probes.Add(1)
	}
	h.mu.Lock()
	gate := h.gate
	h.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.Conn.Do(ctx, keyPos, args)
}

func serverConn(t *testing.T) *held {
	t.Helper()
	if server == "" {
		t.Skip("no server with the module")
	}
	c, err := dial(server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.conn.Close() })
	if _, err := c.Do(context.Background(), 0, []string{"FLUSHALL"}); err != nil {
		t.Fatal(err)
	}
	return &held{Conn: c}
}

// One search for the backend serves every caller; a caller that gives up does not stop it, and no
// caller waits on a lock while it runs.
func TestBackendFoundOnceForConcurrentCallers(t *testing.T) {
	conn := serverConn(t)
	l := ratelimit.New(conn)
	conn.hold()
	impatient, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Backend(impatient); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a caller whose context ends while the server is slow: %v", err)
	}
	var wg sync.WaitGroup
	backends := make([]ratelimit.Backend, 20)
	errs := make([]error, 20)
	for i := range backends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			backends[i], errs[i] = l.Backend(context.Background())
		}()
	}
	time.Sleep(50 * time.Millisecond) // the callers waiting (were one late, it would find the backend known)
	conn.let()
	wg.Wait()
	for i := range backends {
		if backends[i] != ratelimit.Module || errs[i] != nil {
			t.Fatalf("caller %d: %q, %v", i, backends[i], errs[i])
		}
	}
	if n := conn.probes.Load(); n != 1 {
		t.Fatalf("%d searches for 21 callers", n)
	}
}

// A search that fails is made again by the next call.
func TestBackendSearchedAgainAfterAFailure(t *testing.T) {
	conn := serverConn(t)
	l := ratelimit.New(conn, ratelimit.WithBackgroundTimeout(100*time.Millisecond))
	conn.hold()
	if _, err := l.Backend(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a search past the background timeout: %v", err)
	}
	conn.let()
	if b, err := l.Backend(context.Background()); b != ratelimit.Module || err != nil {
		t.Fatalf("the next search: %q, %v", b, err)
	}
}

// A permit's release on a server that does not answer ends at the background timeout, whatever
// the caller's context.
func TestPermitEndsOnAServerThatDoesNotAnswer(t *testing.T) {
	conn := serverConn(t)
	l := ratelimit.New(conn, ratelimit.WithBackgroundTimeout(200*time.Millisecond))
	p, err := l.Hold(context.Background(), "rl:held", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	conn.hold()
	defer conn.let()
	ended := make(chan error, 1)
	go func() { _, err := p.End(context.Background()); ended <- err }()
	select {
	case err := <-ended:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("End on a server that does not answer: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("End still waits on a server that does not answer")
	}
}
