// RATELIMIT.TOP's call.

package ratelimit

import (
	"strconv"
	"strings"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/resp"
)

// topCall is RATELIMIT.TOP (the module only): the keys this node denied most (or admitted the
// most cost for, or would have denied in shadow mode) lately, each count with its error bound.
func topCall(o TopOptions) (command[[]TopEntry], error) {
	view := strings.ToUpper(o.View)
	switch view {
	case "":
		view = "DENIED"
	case "DENIED", "ADMITTED", "SHADOWED":
	default:
		return command[[]TopEntry]{}, invalid(`view must be "denied", "admitted" or "shadowed"`)
	}
	args := []string{view}
	if o.Count != 0 {
		if err := positive(o.Count, "COUNT"); err != nil {
			return command[[]TopEntry]{}, err
		}
		args = append(args, "COUNT", strconv.FormatInt(o.Count, 10))
	}
	if o.Reset {
		args = append(args, "RESET")
	}
	parse := func(reply any) ([]TopEntry, error) {
		rows, ok := reply.([]any)
		if !ok {
			return nil, replyError("TOP", reply)
		}
		entries := make([]TopEntry, 0, len(rows))
		for _, row := range rows {
			fields := resp.Fields(row)
			key, _ := fields["key"].(string)
			count, _ := integer(fields["count"])
			bound, _ := integer(fields["error"])
			entries = append(entries, TopEntry{Key: key, Count: count, Error: bound})
		}
		return entries, nil
	}
	return command[[]TopEntry]{Command: "RATELIMIT.TOP", Keys: nil, Args: args, ReadOnly: true, parse: parse}, nil
}
