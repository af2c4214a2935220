// Package settings reads the service's environment: envoyproxy/ratelimit's variables for what the
// two share, with its defaults, and ours under REDIS_RATELIMIT_.
package settings

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Settings is the service's configuration.
type Settings struct {
	Host, DebugHost, GrpcHost         string
	Port, DebugPort, GrpcPort         int
	RuntimeRoot, RuntimeSubdirectory  string
	RuntimeAppDirectory               string
	RuntimeIgnoreDotFiles             bool
	RuntimeWatchRoot                  bool
	MergeDomainConfig                 bool
	RedisSocketType, RedisType        string
	RedisURL, RedisAuth               string
	RedisSentinelAuth                 string
	RedisTLS                          bool
	RedisPipelineWindow               time.Duration
	RedisHealthCheckActiveConnection  bool
	HealthyWithAtLeastOneConfigLoaded bool
	CacheKeyPrefix                    string
	GlobalShadowMode                  bool
	NearLimitRatio                    float64
	HeadersEnabled                    bool
	LimitHeader, RemainingHeader      string
	ResetHeader                       string
	LogLevel, LogFormat               string

	// FailOpen answers OK, with no limit applied, for the descriptors Redis could not decide (the
	// peer's answer, the default, is an error: Envoy then applies its failure_mode_deny).
	FailOpen bool
	// AllOrNothing decides a request's fixed-window descriptors in one HITALL: admitted on every
	// limit or on none, denied hits never counted.
	AllOrNothing bool
}

// unsupported are the peer's settings that would change what it does in a way this service does
// not: refused at start rather than ignored.
var unsupported = map[string]string{
	"BACKEND_TYPE":    "redis",
	"CONFIG_TYPE":     "FILE",
	"REDIS_PERSECOND": "false",
	"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "false",
	"LOCAL_CACHE_SIZE_IN_BYTES":               "0",
	"GLOBAL_QUOTA_MODE":                       "false",
	"RESPONSE_DYNAMIC_METADATA":               "false",
	"GRPC_SERVER_USE_TLS":                     "false",
}

// FromEnv reads the settings from the environment, or says which variable it refuses.
func FromEnv() (Settings, error) {
	r := reader{}
	s := Settings{
		Host:                              r.text("HOST", "0.0.0.0"),
		Port:                              r.integer("PORT", 8080),
		DebugHost:                         r.text("DEBUG_HOST", "0.0.0.0"),
		DebugPort:                         r.integer("DEBUG_PORT", 6070),
		GrpcHost:                          r.text("GRPC_HOST", "0.0.0.0"),
		GrpcPort:                          r.integer("GRPC_PORT", 8081),
		RuntimeRoot:                       r.text("RUNTIME_ROOT", "/srv/runtime_data/current"),
		RuntimeSubdirectory:               r.text("RUNTIME_SUBDIRECTORY", ""),
		RuntimeAppDirectory:               r.text("RUNTIME_APPDIRECTORY", "config"),
		RuntimeIgnoreDotFiles:             r.boolean("RUNTIME_IGNOREDOTFILES", false),
		RuntimeWatchRoot:                  r.boolean("RUNTIME_WATCH_ROOT", true),
		MergeDomainConfig:                 r.boolean("MERGE_DOMAIN_CONFIG", false),
		RedisSocketType:                   strings.ToLower(r.text("REDIS_SOCKET_TYPE", "unix")),
		RedisType:                         strings.ToLower(r.text("REDIS_TYPE", "SINGLE")),
		RedisURL:                          r.text("REDIS_URL", "/var/run/nutcracker/ratelimit.sock"),
		RedisAuth:                         r.text("REDIS_AUTH", ""),
		RedisSentinelAuth:                 r.text("REDIS_SENTINEL_AUTH", ""),
		RedisTLS:                          r.boolean("REDIS_TLS", false),
		RedisPipelineWindow:               r.duration("REDIS_PIPELINE_WINDOW", 0),
		RedisHealthCheckActiveConnection:  r.boolean("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false),
		HealthyWithAtLeastOneConfigLoaded: r.boolean("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false),
		CacheKeyPrefix:                    r.text("CACHE_KEY_PREFIX", ""),
		GlobalShadowMode:                  r.boolean("SHADOW_MODE", false),
		NearLimitRatio:                    r.ratio("NEAR_LIMIT_RATIO", 0.8),
		HeadersEnabled:                    r.boolean("LIMIT_RESPONSE_HEADERS_ENABLED", false),
		LimitHeader:                       r.text("LIMIT_LIMIT_HEADER", "RateLimit-Limit"),
		RemainingHeader:                   r.text("LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
		ResetHeader:                       r.text("LIMIT_RESET_HEADER", "RateLimit-Reset"),
		LogLevel:                          strings.ToLower(r.text("LOG_LEVEL", "WARN")),
		LogFormat:                         strings.ToLower(r.text("LOG_FORMAT", "text")),
		FailOpen:                          r.boolean("REDIS_RATELIMIT_FAIL_OPEN", false),
		AllOrNothing:                      r.boolean("REDIS_RATELIMIT_ALL_OR_NOTHING", false),
	}
	if r.err != nil {
		return Settings{}, r.err
	}
	for name, only := range unsupported {
		if value, set := os.LookupEnv(name); set && !strings.EqualFold(value, only) {
			return Settings{}, fmt.Errorf("%s=%s is not supported (only %s): see docs/envoy.md", name, value, only)
		}
	}
	switch s.RedisSocketType {
	case "tcp", "unix":
	default:
		return Settings{}, fmt.Errorf("REDIS_SOCKET_TYPE must be tcp or unix, not %q", s.RedisSocketType)
	}
	switch s.RedisType {
	case "single", "sentinel", "cluster":
	default:
		return Settings{}, fmt.Errorf("REDIS_TYPE must be single, sentinel or cluster, not %q", s.RedisType)
	}
	switch s.LogLevel {
	case "debug", "info", "warn", "warning", "error", "fatal", "panic", "trace":
	default:
		return Settings{}, fmt.Errorf("LOG_LEVEL must be debug, info, warn or error, not %q", s.LogLevel)
	}
	return s, nil
}

// reader reads variables, keeping the first error.
type reader struct{ err error }

func (r *reader) text(name, fallback string) string {
	if value, set := os.LookupEnv(name); set {
		return value
	}
	return fallback
}

func (r *reader) fail(name, value, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s=%q: %s", name, value, want)
	}
}

// parsed is the variable name read by parse, fallback when unset; want says what it takes.
func parsed[T any](r *reader, name string, fallback T, want string, parse func(string) (T, error)) T {
	value, set := os.LookupEnv(name)
	if !set {
		return fallback
	}
	v, err := parse(value)
	if err != nil {
		r.fail(name, value, want)
	}
	return v
}

func (r *reader) integer(name string, fallback int) int {
	return parsed(r, name, fallback, "an integer", strconv.Atoi)
}

func (r *reader) boolean(name string, fallback bool) bool {
	return parsed(r, name, fallback, "true or false", strconv.ParseBool)
}

func (r *reader) duration(name string, fallback time.Duration) time.Duration {
	return parsed(r, name, fallback, "a duration such as 150us", func(value string) (time.Duration, error) {
		d, err := time.ParseDuration(value)
		if err == nil && d < 0 {
			err = errors.New("negative")
		}
		return d, err
	})
}

func (r *reader) ratio(name string, fallback float64) float64 {
	return parsed(r, name, fallback, "a number", func(value string) (float64, error) { return strconv.ParseFloat(value, 32) })
}
