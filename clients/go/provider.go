// What an LLM provider's answer says about its limits, read from its status and headers with no
// I/O: OpenAI's (and Azure OpenAI's) x-ratelimit-{limit,remaining,reset}-{requests,tokens}, the
// resets Go durations (6m0s); Anthropic's anthropic-ratelimit-{requests,tokens}-*, the resets RFC
// 3339 instants; and the wait: retry-after-ms, then retry-after in seconds or as an HTTP date. A
// figure that does not parse is left out, never guessed; a wait of 0 or less (Azure has sent -1)
// is none. testkit/conformance/provider_answers.json holds every client to the same readings.

package ratelimit

import (
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Stated is one measure's figures as the provider stated them: -1 where it stated notStated.
type Stated struct {
	Limit, Remaining int64
	// ResetAfter is the time until the provider's window resets (-1: not stated).
	ResetAfter time.Duration
}

// ProviderAnswer is what an answer says about the provider's limits.
type ProviderAnswer struct {
	// Throttled: a 429 or a 503.
	Throttled bool
	// RetryAfter is how long the provider asks callers to wait (0: it asks notStated).
	RetryAfter time.Duration
	Requests   Stated
	Tokens     Stated
}

var (
	wholeNumber    = regexp.MustCompile(`^\d+$`)
	fractionNumber = regexp.MustCompile(`^\d*\.\d+$`)
	rfc3339        = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$`)
)

var notStated = Stated{Limit: -1, Remaining: -1, ResetAfter: -1}

func statedCount(text string) int64 {
	text = strings.TrimSpace(text)
	if !wholeNumber.MatchString(text) {
		return -1
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// goDuration is a Go duration as OpenAI sends its resets, never negative.
func goDuration(text string) time.Duration {
	d, err := time.ParseDuration(strings.TrimSpace(text))
	if err != nil || d < 0 {
		return -1
	}
	return d
}

func instantAfter(text string, now time.Time) time.Duration {
	text = strings.TrimSpace(text)
	if !rfc3339.MatchString(text) {
		return -1
	}
	at, err := time.Parse(time.RFC3339Nano, strings.Replace(strings.ToUpper(text[:11])+text[11:], "z", "Z", 1))
	if err != nil {
		return -1
	}
	return max(at.Sub(now), 0)
}

func askedWait(h http.Header, now time.Time) time.Duration {
	if values, ok := h["Retry-After-Ms"]; ok && len(values) > 0 {
		if v, err := strconv.ParseFloat(strings.TrimSpace(values[0]), 64); err == nil && !math.IsInf(v, 0) && !math.IsNaN(v) {
			return max(time.Duration(v*float64(time.Millisecond)), 0)
		}
	}
	text := strings.TrimSpace(h.Get("Retry-After"))
	if text == "" {
		return 0
	}
	if wholeNumber.MatchString(text) || fractionNumber.MatchString(text) {
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return 0
		}
		return max(time.Duration(v*float64(time.Second)), 0)
	}
	at, err := http.ParseTime(text)
	if err != nil {
		return 0
	}
	return max(at.Sub(now), 0)
}

func statedBy(h http.Header, measure string, now time.Time) Stated {
	field := func(name string) (string, bool) {
		values, ok := h[http.CanonicalHeaderKey(name)]
		if !ok || len(values) == 0 {
			return "", false
		}
		return values[0], true
	}
	openai := [3]string{}
	said := false
	for i, f := range []string{"limit", "remaining", "reset"} {
		v, ok := field("x-ratelimit-" + f + "-" + measure)
		openai[i], said = v, said || ok
	}
	if said {
		s := Stated{Limit: statedCount(openai[0]), Remaining: statedCount(openai[1]), ResetAfter: -1}
		if _, ok := field("x-ratelimit-reset-" + measure); ok {
			s.ResetAfter = goDuration(openai[2])
		}
		return s
	}
	names := []string{measure}
	if measure == "tokens" {
		names = append(names, "input-tokens")
	}
	for _, name := range names {
		anthropic := [3]string{}
		said := false
		for i, f := range []string{"limit", "remaining", "reset"} {
			v, ok := field("anthropic-ratelimit-" + name + "-" + f)
			anthropic[i], said = v, said || ok
		}
		if said {
			s := Stated{Limit: statedCount(anthropic[0]), Remaining: statedCount(anthropic[1]), ResetAfter: -1}
			if _, ok := field("anthropic-ratelimit-" + name + "-reset"); ok {
				s.ResetAfter = instantAfter(anthropic[2], now)
			}
			return s
		}
	}
	return notStated
}

// ReadAnswer reads a provider's answer: status its HTTP status (0: no answer, as a timeout). now
// dates Anthropic's resets and an HTTP-date Retry-After.
func ReadAnswer(status int, header http.Header, now time.Time) ProviderAnswer {
	canonical := make(http.Header, len(header))
	for name, values := range header {
		canonical[http.CanonicalHeaderKey(name)] = values
	}
	return ProviderAnswer{
		Throttled:  status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable,
		RetryAfter: askedWait(canonical, now),
		Requests:   statedBy(canonical, "requests", now),
		Tokens:     statedBy(canonical, "tokens", now),
	}
}
