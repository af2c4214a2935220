// Package config reads envoyproxy/ratelimit's YAML: the same files, taken and refused alike, and
// the same lookup of a request's descriptor (nested keys, values, wildcards, metric names). Two
// fields of a limit are ours: algorithm (fixed, sliding, gcra) and time_zone (calendar windows).
package config

import (
	"fmt"
	"sort"
	"strings"
	"time"
	_ "time/tzdata" // calendar zones checked without the host's files

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"gopkg.in/yaml.v2"
)

// Algorithm is how a limit counts.
type Algorithm string

// The algorithms: the peer's fixed window (the default), a sliding window, a GCRA bucket.
const (
	Fixed   Algorithm = "fixed"
	Sliding Algorithm = "sliding"
	GCRA    Algorithm = "gcra"
)

// Limit is one configured limit, or a request's own (a descriptor's limit override).
type Limit struct {
	// FullKey names the limit in metrics: domain.key_value.key...
	FullKey         string
	RequestsPerUnit uint32
	Unit            pb.RateLimitResponse_RateLimit_Unit
	Name            string
	Unlimited       bool
	ShadowMode      bool
	QuotaMode       bool
	DetailedMetric  bool
	Replaces        []string
	Algorithm       Algorithm
	// TimeZone makes a day, week, month or year a calendar one in that zone ("": the peer's
	// windows of 1, 7, 30 and 365 days since the epoch).
	TimeZone string
	// ShareThreshold holds, per descriptor entry, the wildcard its counter is shared under ("":
	// the entry's own value).
	ShareThreshold []string
}

// Proto is the limit as a response names it.
func (l *Limit) Proto() *pb.RateLimitResponse_RateLimit {
	return &pb.RateLimitResponse_RateLimit{RequestsPerUnit: l.RequestsPerUnit, Unit: l.Unit, Name: l.Name}
}

// Seconds is the unit's length, as the peer counts it (a month is 30 days, a year 365).
func Seconds(unit pb.RateLimitResponse_RateLimit_Unit) int64 {
	switch unit {
	case pb.RateLimitResponse_RateLimit_SECOND:
		return 1
	case pb.RateLimitResponse_RateLimit_MINUTE:
		return 60
	case pb.RateLimitResponse_RateLimit_HOUR:
		return 3600
	case pb.RateLimitResponse_RateLimit_DAY:
		return 86400
	case pb.RateLimitResponse_RateLimit_WEEK:
		return 7 * 86400
	case pb.RateLimitResponse_RateLimit_MONTH:
		return 30 * 86400
	case pb.RateLimitResponse_RateLimit_YEAR:
		return 365 * 86400
	}
	return 0
}

// File is one configuration file: its name as the peer reports it, and its text.
type File struct {
	Name string
	Text string
}

// Error is a refused configuration: the file and why.
type Error struct {
	File   string
	Reason string
}

func (e *Error) Error() string { return e.File + ": " + e.Reason }

// Config is a loaded configuration: the limits of every domain.
type Config struct {
	domains map[string]*node
}

type node struct {
	children        map[string]*node
	limit           *Limit
	wildcards       []string
	valueToMetric   bool
	shareThreshold  bool
	wildcardPattern string
}

type yamlReplaces struct {
	Name string
}

type yamlLimit struct {
	RequestsPerUnit uint32 `yaml:"requests_per_unit"`
	Unit            string
	Unlimited       bool
	Name            string
	Replaces        []yamlReplaces
	Algorithm       string
	TimeZone        string `yaml:"time_zone"`
}

type yamlDescriptor struct {
	Key            string
	Value          string
	RateLimit      *yamlLimit `yaml:"rate_limit"`
	Descriptors    []yamlDescriptor
	ShadowMode     bool `yaml:"shadow_mode"`
	QuotaMode      bool `yaml:"quota_mode"`
	DetailedMetric bool `yaml:"detailed_metric"`
	ValueToMetric  bool `yaml:"value_to_metric"`
	ShareThreshold bool `yaml:"share_threshold"`
}

type yamlRoot struct {
	Domain      string
	Descriptors []yamlDescriptor
}

// The fields a file may hold, at any depth, as the peer checks them; algorithm and time_zone are ours.
var fields = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true, "unit": true,
	"requests_per_unit": true, "unlimited": true, "shadow_mode": true, "quota_mode": true, "name": true,
	"replaces": true, "detailed_metric": true, "value_to_metric": true, "share_threshold": true,
	"algorithm": true, "time_zone": true,
}

// Load reads files into one configuration, or says which file it refuses and why. merge lets
// several files add to one domain (MERGE_DOMAIN_CONFIG).
func Load(files []File, merge bool) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	for _, f := range files {
		root, err := parse(f)
		if err != nil {
			return nil, err
		}
		if root.Domain == "" {
			return nil, &Error{f.Name, "config file cannot have empty domain"}
		}
		domain, present := c.domains[root.Domain]
		if present && !merge {
			return nil, &Error{f.Name, fmt.Sprintf("duplicate domain '%s' in config file", root.Domain)}
		}
		if !present {
			domain = &node{children: map[string]*node{}}
			c.domains[root.Domain] = domain
		}
		if err := domain.load(f.Name, root.Domain+".", root.Descriptors); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func parse(f File) (*yamlRoot, error) {
	generic := map[any]any{}
	if err := yaml.Unmarshal([]byte(f.Text), &generic); err != nil {
		return nil, &Error{f.Name, "error loading config file: " + err.Error()}
	}
	if err := checkFields(f.Name, generic); err != nil {
		return nil, err
	}
	var root yamlRoot
	if err := yaml.Unmarshal([]byte(f.Text), &root); err != nil {
		return nil, &Error{f.Name, "error loading config file: " + err.Error()}
	}
	return &root, nil
}

func checkFields(file string, m map[any]any) error {
	for k, v := range m {
		name, ok := k.(string)
		if !ok {
			return &Error{file, fmt.Sprintf("config error, key is not of type string: %v", k)}
		}
		if !fields[name] {
			return &Error{file, fmt.Sprintf("config error, unknown key '%s'", name)}
		}
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				element, ok := e.(map[any]any)
				if !ok {
					return &Error{file, fmt.Sprintf("config error, yaml file contains list of type other than map: %v", e)}
				}
				if err := checkFields(file, element); err != nil {
					return err
				}
			}
		case map[any]any:
			if err := checkFields(file, v); err != nil {
				return err
			}
		case string, int, bool, nil:
		default:
			return &Error{file, "error checking config"}
		}
	}
	return nil
}

func (n *node) load(file, parentKey string, descriptors []yamlDescriptor) error {
	for _, d := range descriptors {
		if d.Key == "" {
			return &Error{file, "descriptor has empty key"}
		}
		finalKey := d.Key
		if d.Value != "" {
			finalKey += "_" + d.Value
		}
		fullKey := parentKey + finalKey
		if _, present := n.children[finalKey]; present {
			return &Error{file, fmt.Sprintf("duplicate descriptor composite key '%s'", fullKey)}
		}
		var limit *Limit
		if d.RateLimit != nil {
			var err error
			if limit, err = readLimit(file, fullKey, d); err != nil {
				return err
			}
		}
		wildcard := strings.HasSuffix(finalKey, "*")
		if d.ShareThreshold && !wildcard {
			return &Error{file, fmt.Sprintf("share_threshold can only be used with wildcard values (ending with '*'), but found key '%s'", finalKey)}
		}
		child := &node{children: map[string]*node{}, limit: limit, valueToMetric: d.ValueToMetric, shareThreshold: d.ShareThreshold}
		if d.ShareThreshold {
			child.wildcardPattern = finalKey
		}
		if wildcard {
			n.wildcards = append(n.wildcards, finalKey)
		}
		if err := child.load(file, fullKey+".", d.Descriptors); err != nil {
			return err
		}
		n.children[finalKey] = child
	}
	return nil
}

func readLimit(file, fullKey string, d yamlDescriptor) (*Limit, error) {
	y := d.RateLimit
	value, present := pb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(y.Unit)]
	validUnit := present && value != int32(pb.RateLimitResponse_RateLimit_UNKNOWN)
	if y.Unlimited && validUnit {
		return nil, &Error{file, "should not specify rate limit unit when unlimited"}
	}
	if !y.Unlimited && !validUnit {
		return nil, &Error{file, fmt.Sprintf("invalid rate limit unit '%s'", y.Unit)}
	}
	limit := &Limit{
		FullKey: fullKey, RequestsPerUnit: y.RequestsPerUnit, Unit: pb.RateLimitResponse_RateLimit_Unit(value),
		Name: y.Name, Unlimited: y.Unlimited, ShadowMode: d.ShadowMode, QuotaMode: d.QuotaMode,
		DetailedMetric: d.DetailedMetric, Algorithm: Fixed, TimeZone: y.TimeZone,
	}
	for _, r := range y.Replaces {
		if r.Name == "" {
			return nil, &Error{file, "should not have an empty replaces entry"}
		}
		if r.Name == y.Name {
			return nil, &Error{file, "replaces should not contain name of same descriptor"}
		}
		limit.Replaces = append(limit.Replaces, r.Name)
	}
	switch Algorithm(strings.ToLower(y.Algorithm)) {
	case "", Fixed:
	case Sliding:
		limit.Algorithm = Sliding
	case GCRA:
		limit.Algorithm = GCRA
	default:
		return nil, &Error{file, fmt.Sprintf("invalid rate limit algorithm '%s' (fixed, sliding or gcra)", y.Algorithm)}
	}
	if limit.Algorithm != Fixed && (y.Unlimited || y.RequestsPerUnit == 0) {
		return nil, &Error{file, fmt.Sprintf("the %s algorithm needs requests_per_unit >= 1", limit.Algorithm)}
	}
	if y.TimeZone != "" {
		switch limit.Unit {
		case pb.RateLimitResponse_RateLimit_DAY, pb.RateLimitResponse_RateLimit_WEEK,
			pb.RateLimitResponse_RateLimit_MONTH, pb.RateLimitResponse_RateLimit_YEAR:
		default:
			return nil, &Error{file, "time_zone needs a calendar unit (day, week, month or year)"}
		}
		if limit.Algorithm != Fixed {
			return nil, &Error{file, "time_zone makes calendar windows, which the fixed algorithm alone has"}
		}
		if !validZone(y.TimeZone) {
			return nil, &Error{file, fmt.Sprintf("unknown time_zone '%s' (UTC, an offset such as +05:30, or a name such as Europe/Paris)", y.TimeZone)}
		}
	}
	return limit, nil
}

func validZone(zone string) bool {
	if strings.EqualFold(zone, "UTC") {
		return true
	}
	if len(zone) == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':' {
		_, err := time.Parse("15:04", zone[1:])
		return err == nil
	}
	_, err := time.LoadLocation(zone)
	return err == nil && zone != "Local"
}

// Empty reports whether no domain is configured.
func (c *Config) Empty() bool { return len(c.domains) == 0 }

// Dump lists the limits as the peer's /rlconfig does: one line each.
func (c *Config) Dump() string {
	var lines []string
	var walk func(n *node)
	walk = func(n *node) {
		if n.limit != nil {
			l := n.limit
			lines = append(lines, fmt.Sprintf("%s: unit=%s requests_per_unit=%d, shadow_mode: %t, quota_mode: %t",
				l.FullKey, l.Unit, l.RequestsPerUnit, l.ShadowMode, l.QuotaMode))
		}
		for _, child := range n.children {
			walk(child)
		}
	}
	for _, d := range c.domains {
		walk(d)
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// Lookup finds the limit of a request's descriptor in domain, as the peer does: nil when none
// applies (an unknown domain, no match, or a match shallower or deeper than the descriptor).
func (c *Config) Lookup(domain string, d *rlv3.RateLimitDescriptor) *Limit {
	root := c.domains[domain]
	if root == nil {
		return nil
	}
	if override := d.GetLimit(); override != nil {
		return &Limit{FullKey: overrideKey(domain, d), RequestsPerUnit: override.GetRequestsPerUnit(),
			Unit: pb.RateLimitResponse_RateLimit_Unit(override.GetUnit()), Algorithm: Fixed}
	}
	var (
		found            *Limit
		detailed         strings.Builder
		valueToMetric    strings.Builder
		sharedByEntry    map[int]string
		children, parent = root.children, root
	)
	detailed.WriteString(domain)
	valueToMetric.WriteString(domain)
	for i, entry := range d.Entries {
		finalKey := entry.Key + "_" + entry.Value
		detailed.WriteString("." + finalKey)
		next := children[finalKey]
		matchedWildcard := ""
		if next == nil {
			for _, w := range parent.wildcards {
				if strings.HasPrefix(finalKey, strings.TrimSuffix(w, "*")) {
					next, matchedWildcard = children[w], w
					break
				}
			}
		}
		byValue := next != nil
		if next == nil {
			next = children[entry.Key]
		}
		if matchedWildcard != "" && next != nil && next.shareThreshold && next.wildcardPattern != "" {
			if sharedByEntry == nil {
				sharedByEntry = map[int]string{}
			}
			sharedByEntry[i] = strings.TrimPrefix(next.wildcardPattern, entry.Key+"_")
		}
		valueToMetric.WriteString(".")
		valueToMetric.WriteString(entry.Key)
		if next != nil {
			value := ""
			switch {
			case matchedWildcard != "" && sharedByEntry[i] != "":
				value = sharedByEntry[i]
			case matchedWildcard != "" && next.valueToMetric:
				value = entry.Value
			case matchedWildcard != "":
				value = strings.TrimPrefix(matchedWildcard, entry.Key+"_")
			case byValue || next.valueToMetric:
				value = entry.Value
			}
			if value != "" {
				valueToMetric.WriteString("_" + value)
			}
		}
		if next != nil && next.limit != nil && i == len(d.Entries)-1 {
			copied := *next.limit
			found = &copied
			if len(sharedByEntry) > 0 {
				found.ShareThreshold = make([]string, len(d.Entries))
				for idx, pattern := range sharedByEntry {
					found.ShareThreshold[idx] = pattern
				}
			}
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		children, parent = next.children, next
	}
	if found == nil {
		return nil
	}
	switch {
	case found.DetailedMetric && len(found.ShareThreshold) > 0:
		var b strings.Builder
		b.WriteString(domain)
		for i, entry := range d.Entries {
			b.WriteString("." + entry.Key)
			if i < len(found.ShareThreshold) && found.ShareThreshold[i] != "" {
				b.WriteString("_" + found.ShareThreshold[i])
			} else if entry.Value != "" {
				b.WriteString("_" + entry.Value)
			}
		}
		found.FullKey = b.String()
	case found.DetailedMetric:
		found.FullKey = detailed.String()
	default:
		found.FullKey = valueToMetric.String()
	}
	return found
}

func overrideKey(domain string, d *rlv3.RateLimitDescriptor) string {
	parts := make([]string, 0, len(d.Entries))
	for _, entry := range d.Entries {
		part := entry.Key
		if entry.Value != "" {
			part += "_" + entry.Value
		}
		parts = append(parts, part)
	}
	return domain + "." + strings.Join(parts, ".")
}
