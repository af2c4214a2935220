// Command redis-ratelimit-envoy is a rate limit service for Envoy (and Istio, Envoy Gateway,
// Emissary, Gloo, Contour) on the redis-ratelimit module: a drop-in for envoyproxy/ratelimit,
// configured by the same files and environment. See docs/envoy.md.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlrueidis"
	"github.com/redis/rueidis"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/envoy/internal/runtime"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/envoy/internal/service"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/envoy/internal/settings"
)

// healthName is the gRPC health service's name for this service, as the peer registers it.
const healthName = "ratelimit"

func main() {
	if err := run(); err != nil {
		slog.Error(err.Error())
		os.Exit(1)
	}
}

func run() error {
	s, err := settings.FromEnv()
	if err != nil {
		return err
	}
	logging(s)
	svc := service.New(s)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	options, err := redisOptions(s)
	if err != nil {
		return err
	}
	client, err := connect(ctx, options, func(c rueidis.Client) { svc.SetLimiter(rlrueidis.New(c)) })
	if err != nil {
		return err
	}
	defer func() {
		if c := client(); c != nil {
			c.Close()
		}
	}()

	dir := runtime.Directory{Root: s.RuntimeRoot, Subdirectory: s.RuntimeSubdirectory, AppDirectory: s.RuntimeAppDirectory,
		WatchRoot: s.RuntimeWatchRoot, IgnoreDotFiles: s.RuntimeIgnoreDotFiles}
	files := dir.Files()
	svc.Load(files)
	go dir.Watch(ctx, time.Second, files, svc.Load)

	h := service.NewHealth(svc)
	grpcHealth := health.NewServer()
	grpcHealth.SetServingStatus(healthName, healthpb.HealthCheckResponse_SERVING)
	if s.RedisHealthCheckActiveConnection {
		go watchRedis(ctx, client, h, grpcHealth)
	}

	grpcServer := grpc.NewServer(grpc.UnaryInterceptor(recovered))
	pb.RegisterRateLimitServiceServer(grpcServer, svc)
	healthpb.RegisterHealthServer(grpcServer, grpcHealth)
	grpcListener, err := net.Listen("tcp", net.JoinHostPort(s.GrpcHost, strconv.Itoa(s.GrpcPort)))
	if err != nil {
		return err
	}
	httpServer := &http.Server{Addr: net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), Handler: svc.Routes(h), ReadHeaderTimeout: 10 * time.Second}
	debugServer := &http.Server{Addr: net.JoinHostPort(s.DebugHost, strconv.Itoa(s.DebugPort)), Handler: svc.DebugRoutes(), ReadHeaderTimeout: 10 * time.Second}
	failed := make(chan error, 3)
	go func() { failed <- grpcServer.Serve(grpcListener) }()
	for _, server := range []*http.Server{httpServer, debugServer} {
		listener, err := net.Listen("tcp", server.Addr)
		if err != nil {
			return err
		}
		go func() { failed <- server.Serve(listener) }()
	}
	slog.Warn("listening", "grpc", grpcListener.Addr().String(), "http", httpServer.Addr, "debug", debugServer.Addr)

	select {
	case <-ctx.Done():
	case err := <-failed:
		return err
	}
	// Graceful shutdown: unhealthy at once, calls in flight answered, then closed.
	slog.Warn("shutting down")
	h.Draining.Store(true)
	grpcHealth.Shutdown()
	done := make(chan struct{})
	go func() { grpcServer.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		grpcServer.Stop()
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = httpServer.Shutdown(shutdown)
	_ = debugServer.Shutdown(shutdown)
	return nil
}

// recovered answers a call whose handler panicked with Internal, and logs it, rather than end
// the process (gRPC does not recover).
func recovered(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (response any, err error) {
	defer func() {
		if p := recover(); p != nil {
			slog.Error("a call panicked", "method", info.FullMethod, "panic", p, "stack", string(debug.Stack()))
			response, err = nil, status.Errorf(codes.Internal, "internal error: %v", p)
		}
	}()
	return handler(ctx, req)
}

func logging(s settings.Settings) {
	level := slog.LevelWarn
	switch s.LogLevel {
	case "trace", "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "error", "fatal", "panic":
		level = slog.LevelError
	}
	options := &slog.HandlerOptions{Level: level}
	var handler slog.Handler = slog.NewTextHandler(os.Stderr, options)
	if s.LogFormat == "json" {
		handler = slog.NewJSONHandler(os.Stderr, options)
	}
	slog.SetDefault(slog.New(handler))
}

// redisOptions is the peer's Redis settings as rueidis's: REDIS_URL a host:port (or a socket's
// path), a list for a cluster, the master's name then the sentinels for sentinel; REDIS_AUTH a
// password or user:password.
func redisOptions(s settings.Settings) (rueidis.ClientOption, error) {
	urls := strings.Split(s.RedisURL, ",")
	o := rueidis.ClientOption{DisableCache: true, InitAddress: urls, MaxFlushDelay: s.RedisPipelineWindow}
	o.Username, o.Password = credentials(s.RedisAuth)
	if s.RedisSocketType == "unix" {
		o.DialCtxFn = func(ctx context.Context, path string, dialer *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", path)
		}
	}
	if s.RedisTLS {
		config, err := tlsConfig()
		if err != nil {
			return o, err
		}
		o.TLSConfig = config
	}
	switch s.RedisType {
	case "single":
		o.InitAddress, o.ForceSingleClient = []string{s.RedisURL}, true
	case "sentinel":
		if len(urls) < 2 {
			return o, errors.New("REDIS_URL for sentinel: the master's name, then the sentinels: <redis master name>,<sentinel1>,...,<sentineln>")
		}
		o.InitAddress = urls[1:]
		o.Sentinel = rueidis.SentinelOption{MasterSet: urls[0], TLSConfig: o.TLSConfig}
		o.Sentinel.Username, o.Sentinel.Password = credentials(s.RedisSentinelAuth)
	}
	return o, nil
}

func credentials(auth string) (user, password string) {
	if user, password, found := strings.Cut(auth, ":"); found {
		return user, password
	}
	return "", auth
}

// tlsConfig is REDIS_TLS's: the system's roots, or REDIS_TLS_CACERT's, and a client certificate
// when REDIS_TLS_CLIENT_CERT and REDIS_TLS_CLIENT_KEY name one.
func tlsConfig() (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	config.InsecureSkipVerify, _ = strconv.ParseBool(os.Getenv("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"))
	if path := os.Getenv("REDIS_TLS_CACERT"); path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("REDIS_TLS_CACERT: no certificate in %s", path)
		}
	}
	if cert, key := os.Getenv("REDIS_TLS_CLIENT_CERT"), os.Getenv("REDIS_TLS_CLIENT_KEY"); cert != "" && key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

// connect makes the Redis client: at once when Redis answers; refused credentials stop the
// service (as they stop the peer); an unreachable Redis is tried again every second in the
// background, the limited requests failing (or admitted, REDIS_RATELIMIT_FAIL_OPEN) meanwhile.
func connect(ctx context.Context, o rueidis.ClientOption, connected func(rueidis.Client)) (func() rueidis.Client, error) {
	client := &atomicClient{}
	c, err := rueidis.NewClient(o)
	if err == nil {
		client.set(c)
		connected(c)
		return client.get, nil
	}
	if refusedCredentials(err) {
		return nil, fmt.Errorf("redis refused the credentials (REDIS_AUTH): %w", err)
	}
	slog.Error("redis unreachable, trying again every second", "error", err)
	go func() {
		for ctx.Err() == nil {
			time.Sleep(time.Second)
			if c, err := rueidis.NewClient(o); err == nil {
				client.set(c)
				connected(c)
				slog.Warn("connected to redis")
				return
			}
		}
	}()
	return client.get, nil
}

type atomicClient struct {
	p atomic.Pointer[rueidis.Client]
}

func (a *atomicClient) set(c rueidis.Client) { a.p.Store(&c) }

func (a *atomicClient) get() rueidis.Client {
	if p := a.p.Load(); p != nil {
		return *p
	}
	return nil
}

func refusedCredentials(err error) bool {
	text := strings.ToUpper(err.Error())
	return strings.Contains(text, "WRONGPASS") || strings.Contains(text, "NOAUTH") || strings.Contains(text, "INVALID PASSWORD") ||
		strings.Contains(text, "INVALID USERNAME")
}

// watchRedis fails the health checks while Redis does not answer a PING
// (REDIS_HEALTH_CHECK_ACTIVE_CONNECTION).
func watchRedis(ctx context.Context, client func() rueidis.Client, h *service.Health, grpcHealth *health.Server) {
	for ctx.Err() == nil {
		ok := false
		if c := client(); c != nil {
			ping, cancel := context.WithTimeout(ctx, time.Second)
			ok = c.Do(ping, c.B().Ping().Build()).Error() == nil
			cancel()
		}
		h.RedisOK.Store(ok)
		status := healthpb.HealthCheckResponse_SERVING
		if !ok {
			status = healthpb.HealthCheckResponse_NOT_SERVING
		}
		grpcHealth.SetServingStatus(healthName, status)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
