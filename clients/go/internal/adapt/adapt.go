// Package adapt holds what this project's adapters (rlrueidis, rlvalkey) share in turning a
// client's replies into what ratelimit.Conn promises.
package adapt

import (
	"strings"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// ServerErrors is reply with the error values a client leaves inside arrays and maps (rueidis,
// valkey-go) turned into *ServerError, for adapters.
func ServerErrors(reply any) any {
	switch v := reply.(type) {
	case []any:
		for i, item := range v {
			v[i] = ServerErrors(item)
		}
	case map[string]any:
		for name, item := range v {
			v[name] = ServerErrors(item)
		}
	case error:
		return &ratelimit.ServerError{Message: v.Error()}
	}
	return reply
}

// ReadOnly reports whether err is a replica's refusal of a write (READONLY): EachPrimary over
// every node of a cluster may skip those, the replica gets the write from its primary.
func ReadOnly(err error) bool {
	server, ok := err.(*ratelimit.ServerError)
	return ok && strings.HasPrefix(server.Message, "READONLY")
}
