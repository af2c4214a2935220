// Package resp reads the shapes of the server's replies that the client packages share.
package resp

// Fields reads a map reply: RESP3's map, or RESP2's flat list of names and values.
func Fields(reply any) map[string]any {
	switch v := reply.(type) {
	case map[string]any:
		return v
	case []any:
		out := make(map[string]any, len(v)/2)
		for i := 0; i+1 < len(v); i += 2 {
			if name, ok := v[i].(string); ok {
				out[name] = v[i+1]
			}
		}
		return out
	}
	return nil
}
