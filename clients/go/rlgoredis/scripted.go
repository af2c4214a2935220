package rlgoredis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis/go-redis/v9"
)

// Scripter is a go-redis client that runs scripts: the two methods that redis_rate's and
// ulule/limiter's client interfaces share, so that a wrapper or a mock made for either is taken
// by the drop-ins as it is by them.
type Scripter interface {
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
	ScriptLoad(ctx context.Context, script string) *redis.StringCmd
}

// ErrScriptsOnly is returned where a client that only runs scripts (a Scripter that is not a
// redis.UniversalClient) meets a server without the module: a script cannot call the Functions
// library.
var ErrScriptsOnly = errors.New("rlgoredis: this client only runs scripts, and a script cannot call the ratelimit " +
	"Functions library: load the ratelimit module on the server, or pass a redis.UniversalClient")

// ConnFor is the Conn for client: its own commands where it is a redis.UniversalClient (a Client,
// ClusterClient, Ring, or a type that embeds one), else each command inside a script (EVALSHA),
// routed by its key, which reaches the module's commands only.
func ConnFor(client Scripter) ratelimit.Conn {
	if universal, ok := client.(redis.UniversalClient); ok {
		return Conn{universal}
	}
	return scripted{client}
}

// The one script: the command in ARGV, its key also in KEYS (for routing).
const script = "return redis.call(unpack(ARGV))"

var scriptSHA = func() string { sum := sha1.Sum([]byte(script)); return hex.EncodeToString(sum[:]) }()

// What the server adds to the error of a command called from a script.
var scriptSuffix = regexp.MustCompile(` script: [^ ]*,? ?on @user_script:\d+\.$`)

type scripted struct{ client Scripter }

func (s scripted) Do(ctx context.Context, keyPos int, args []string) (any, error) {
	name := strings.ToUpper(args[0])
	if name == "FCALL" || name == "FUNCTION" {
		return nil, ErrScriptsOnly
	}
	var keys []string
	if keyPos > 0 {
		keys = args[keyPos : keyPos+1]
	}
	reply, err := result(s.client.EvalSha(ctx, scriptSHA, keys, words(args)...))
	var server *ratelimit.ServerError
	if errors.As(err, &server) && strings.HasPrefix(server.Message, "NOSCRIPT") {
		if err := s.client.ScriptLoad(ctx, script).Err(); err != nil {
			return nil, err
		}
		reply, err = result(s.client.EvalSha(ctx, scriptSHA, keys, words(args)...))
	}
	if errors.As(err, &server) {
		message := scriptSuffix.ReplaceAllString(server.Message, "")
		if strings.HasSuffix(message, "command called from script") {
			// As the server answers the command outside a script, which the limiter looks for.
			message = "ERR unknown command '" + args[0] + "'"
		}
		return nil, &ratelimit.ServerError{Message: message}
	}
	return reply, err
}

// EachPrimary: a Scripter names no nodes; the one it reaches.
func (s scripted) EachPrimary(_ context.Context, fn func(ratelimit.Conn) error) error { return fn(s) }

// Cluster: a Scripter does not say; a call of several keys is left to the server to refuse.
func (s scripted) Cluster() bool { return false }
