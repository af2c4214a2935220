package envoy_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// configCase is a runtime directory's files, and whether the peer takes them (ours: the same,
// unless ours is set).
type configCase struct {
	name  string
	files map[string]string
	env   []string
	// ours, when set, is what ours does where the peer cannot agree: it takes our own fields.
	ours *bool
}

var yes = true

func limitFile(domain, rateLimit string) string {
	return "domain: " + domain + "\ndescriptors:\n  - key: k\n    rate_limit:\n" + rateLimit
}

// configCases are the peer's own test files (test/config: the cases its loader takes and
// refuses), each alone, and the cases its documentation and code name beside them.
func configCases(t *testing.T) []configCase {
	paths, err := filepath.Glob(filepath.Join(peerSource, "test", "config", "*.yaml"))
	if err != nil || len(paths) < 15 {
		t.Fatalf("the peer's test/config files: %v %v", paths, err)
	}
	var cases []configCase
	for _, path := range paths {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(path)
		cases = append(cases, configCase{name: "peer's " + name, files: map[string]string{name: string(text)}})
	}
	read := func(name string) string {
		text, err := os.ReadFile(filepath.Join(peerSource, "test", "config", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(text)
	}
	merged := map[string]string{"a.yaml": read("merge_domain_key1.yaml"), "b.yaml": read("merge_domain_key2.yaml")}
	return append(cases,
		configCase{name: "one domain in two files", files: merged},
		configCase{name: "one domain in two files, merged", files: merged, env: []string{"MERGE_DOMAIN_CONFIG=true"}},
		configCase{name: "no file", files: map[string]string{}},
		configCase{name: "week, any case", files: map[string]string{"a.yaml": limitFile("d", "      unit: WeeK\n      requests_per_unit: 5\n")}},
		configCase{name: "requests_per_unit 0", files: map[string]string{"a.yaml": limitFile("d", "      unit: second\n      requests_per_unit: 0\n")}},
		configCase{name: "no unit", files: map[string]string{"a.yaml": limitFile("d", "      requests_per_unit: 5\n")}},
		configCase{name: "a negative limit", files: map[string]string{"a.yaml": limitFile("d", "      unit: second\n      requests_per_unit: -5\n")}},
		configCase{name: "a fractional limit", files: map[string]string{"a.yaml": limitFile("d", "      unit: second\n      requests_per_unit: 1.5\n")}},
		configCase{name: "quota_mode and value_to_metric", files: map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    quota_mode: true\n    value_to_metric: true\n    rate_limit:\n      unit: hour\n      requests_per_unit: 5\n"}},
		configCase{name: "a replaces loop", files: map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      name: a\n      unit: hour\n      requests_per_unit: 5\n      replaces:\n        - name: b\n  - key: b\n    rate_limit:\n      name: b\n      unit: hour\n      requests_per_unit: 5\n      replaces:\n        - name: a\n"}},
		configCase{name: "an empty file", files: map[string]string{"a.yaml": ""}},
		configCase{name: "a dotfile", files: map[string]string{".hidden.yaml": "domain: [", "a.yaml": limitFile("d", "      unit: second\n      requests_per_unit: 5\n")}},
		configCase{name: "a dotfile ignored", files: map[string]string{".hidden.yaml": "domain: [", "a.yaml": limitFile("d", "      unit: second\n      requests_per_unit: 5\n")},
			env: []string{"RUNTIME_IGNOREDOTFILES=true"}},
		configCase{name: "ours: a sliding window", files: map[string]string{"a.yaml": limitFile("d", "      unit: minute\n      requests_per_unit: 5\n      algorithm: sliding\n")}, ours: &yes},
		configCase{name: "ours: a GCRA bucket", files: map[string]string{"a.yaml": limitFile("d", "      unit: second\n      requests_per_unit: 5\n      algorithm: GCRA\n")}, ours: &yes},
		configCase{name: "ours: a calendar day in Paris", files: map[string]string{"a.yaml": limitFile("d", "      unit: day\n      requests_per_unit: 5\n      time_zone: Europe/Paris\n")}, ours: &yes},
		configCase{name: "ours misspelled", files: map[string]string{"a.yaml": limitFile("d", "      unit: minute\n      requests_per_unit: 5\n      algoritm: sliding\n")}},
		configCase{name: "an unknown algorithm", files: map[string]string{"a.yaml": limitFile("d", "      unit: minute\n      requests_per_unit: 5\n      algorithm: leaky\n")}},
		configCase{name: "an unknown zone", files: map[string]string{"a.yaml": limitFile("d", "      unit: day\n      requests_per_unit: 5\n      time_zone: Mars/Olympus\n")}},
		configCase{name: "a zone on minutes", files: map[string]string{"a.yaml": limitFile("d", "      unit: minute\n      requests_per_unit: 5\n      time_zone: UTC\n")}},
	)
}

// TestConfigFiles: every configuration the peer takes, ours takes with the same limits (its
// /rlconfig), and every one it refuses, ours refuses, naming the same file.
func TestConfigFiles(t *testing.T) {
	ourRedis, peerRedis := redisServer(t, true), redisServer(t, false)
	for _, c := range configCases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			peer := start(t, options{binary: peerBinary, redis: peerRedis.Addr(), files: c.files, env: c.env})
			ours := start(t, options{binary: ourBinary, redis: ourRedis.Addr(), files: c.files, env: c.env})
			peerRefused, peerFile := refused(peer)
			ourRefused, ourFile := refused(ours)
			wantOurs := !peerRefused
			if c.ours != nil {
				wantOurs = *c.ours
				if !peerRefused {
					t.Fatalf("the peer took a file with our fields:\n%s", peer.log)
				}
			}
			if ourRefused == wantOurs {
				t.Fatalf("ours took it: %t, want %t\nours:\n%s\npeer:\n%s", !ourRefused, wantOurs, ours.log, peer.log)
			}
			if c.ours != nil {
				return
			}
			if peerRefused {
				// Of several files, the peer reads them in a map's order: it names either.
				if _, ofTheCase := c.files[ourFile]; ourFile != peerFile && !(len(c.files) > 1 && ofTheCase) {
					t.Fatalf("ours refused %q, the peer %q", ourFile, peerFile)
				}
				for _, s := range []*service{peer, ours} {
					// A call that changes nothing, asked again when the connection broke (Unavailable:
					// a busy machine's broken pipe), not when the service answered.
					_, err := s.ask(t, request("d", 0, []string{"k", "v"}))
					for attempt := 0; status.Code(err) == codes.Unavailable && attempt < 3; attempt++ {
						time.Sleep(200 * time.Millisecond)
						_, err = s.ask(t, request("d", 0, []string{"k", "v"}))
					}
					if err == nil || !strings.Contains(err.Error(), "no rate limit configuration loaded") {
						t.Fatalf("%s answered with no configuration: %v", s.name, err)
					}
					if code, _ := s.post("/json", `{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`); code != 400 {
						t.Fatalf("%s's /json answered %d with no configuration", s.name, code)
					}
				}
				return
			}
			if p, o := dump(peer), dump(ours); p != o {
				t.Fatalf("/rlconfig differs:\npeer:\n%s\nours:\n%s", p, o)
			}
		})
	}
}

// refused reports whether a service logged its configuration refused, and the file it named.
func refused(s *service) (bool, string) {
	const prefix = "Error loading new configuration: "
	log := s.log.String()
	at := strings.Index(log, prefix)
	if at < 0 {
		return false, ""
	}
	rest := log[at+len(prefix):]
	return true, rest[:strings.Index(rest, ":")]
}

// dump is a service's /rlconfig, its lines sorted (the peer's come in a map's order).
func dump(s *service) string {
	_, text := s.get("/rlconfig", s.debugPort)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
