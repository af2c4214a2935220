package io.github.redisratelimit;

import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What an LLM provider's answer says about its limits, read from its status and headers with no
 * I/O: OpenAI's (and Azure OpenAI's) {@code x-ratelimit-{limit,remaining,reset}-{requests,tokens}},
 * the resets Go durations ({@code 6m0s}); Anthropic's {@code anthropic-ratelimit-{requests,tokens}-*},
 * the resets RFC 3339 instants; and the wait: {@code retry-after-ms}, then {@code retry-after} in
 * seconds or as an HTTP date. A figure that does not parse is left out, never guessed; a wait of 0
 * or less (Azure has sent -1) is none. testkit/conformance/provider_answers.json holds every client
 * to the same readings.
 *
 * @param throttled a 429 or a 503
 * @param retryAfter how long the provider asks callers to wait; empty when it asks nothing
 * @param requests the requests' figures
 * @param tokens the tokens' figures
 */
public record ProviderAnswer(boolean throttled, Optional<Duration> retryAfter, Stated requests, Stated tokens) {
    /**
     * One measure's figures as the provider stated them (empty: not stated).
     *
     * @param limit the stated limit
     * @param remaining what the provider says remains
     * @param resetAfter until the provider's window resets
     */
    public record Stated(OptionalLong limit, OptionalLong remaining, Optional<Duration> resetAfter) {
        static final Stated NOTHING = new Stated(OptionalLong.empty(), OptionalLong.empty(), Optional.empty());
    }

    private static final Pattern WHOLE = Pattern.compile("\\d+");
    private static final Pattern FRACTION = Pattern.compile("\\d*\\.\\d+");
    private static final Pattern GO_PART = Pattern.compile("(\\d+(?:\\.\\d*)?|\\.\\d+)(ns|us|µs|μs|ms|s|m|h)");
    private static final Pattern RFC3339 =
            Pattern.compile("\\d{4}-\\d{2}-\\d{2}[Tt ]\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?([Zz]|[+-]\\d{2}:\\d{2})");

    /**
     * A Go duration ({@code 1s}, {@code 6m0s}, {@code 12ms}, {@code 1h2m3.5s}, {@code 0}).
     *
     * @param text the duration
     * @return it, to the nanosecond; empty if not one
     */
    public static Optional<Duration> goDuration(String text) {
        String body = text.strip();
        if (body.equals("0") || body.equals("+0") || body.equals("-0")) {
            return Optional.of(Duration.ZERO);
        }
        body = body.startsWith("+") ? body.substring(1) : body;
        if (body.isEmpty() || body.startsWith("-")) {
            return Optional.empty();
        }
        Matcher part = GO_PART.matcher(body);
        double nanos = 0;
        int at = 0;
        while (at < body.length()) {
            if (!part.find(at) || part.start() != at) {
                return Optional.empty();
            }
            double unit = switch (part.group(2)) {
                case "ns" -> 1;
                case "us", "µs", "μs" -> 1e3;
                case "ms" -> 1e6;
                case "s" -> 1e9;
                case "m" -> 60e9;
                default -> 3600e9;
            };
            nanos += Double.parseDouble(part.group(1)) * unit;
            at = part.end();
        }
        return Optional.of(Duration.ofNanos(Math.round(nanos)));
    }

    private static OptionalLong count(String text) {
        if (text == null || !WHOLE.matcher(text.strip()).matches()) {
            return OptionalLong.empty();
        }
        try {
            return OptionalLong.of(Long.parseLong(text.strip()));
        } catch (NumberFormatException e) {
            return OptionalLong.empty();
        }
    }

    private static Optional<Duration> instantAfter(String text, Instant now) {
        String t = text.strip();
        if (!RFC3339.matcher(t).matches()) {
            return Optional.empty();
        }
        try {
            Instant at = OffsetDateTime.parse(t.toUpperCase(Locale.ROOT).replace(' ', 'T')).toInstant();
            Duration left = Duration.between(now, at);
            return Optional.of(left.isNegative() ? Duration.ZERO : left);
        } catch (DateTimeParseException e) {
            return Optional.empty();
        }
    }

    private static Optional<Duration> waitAsked(Map<String, String> h, Instant now) {
        String ms = h.get("retry-after-ms");
        if (ms != null) {
            try {
                double v = Double.parseDouble(ms.strip());
                if (Double.isFinite(v)) {
                    return v > 0 ? Optional.of(Duration.ofNanos(Math.round(v * 1e6))) : Optional.empty();
                }
            } catch (NumberFormatException e) {
                // not a number: the next header decides
            }
        }
        String text = h.get("retry-after");
        if (text == null) {
            return Optional.empty();
        }
        text = text.strip();
        if (WHOLE.matcher(text).matches() || FRACTION.matcher(text).matches()) {
            double seconds = Double.parseDouble(text);
            return seconds > 0 ? Optional.of(Duration.ofNanos(Math.round(seconds * 1e9))) : Optional.empty();
        }
        try {
            Duration left = Duration.between(now, ZonedDateTime.parse(text, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant());
            return left.isNegative() || left.isZero() ? Optional.empty() : Optional.of(left);
        } catch (DateTimeParseException e) {
            return Optional.empty();
        }
    }

    private static Stated stated(Map<String, String> h, String measure, Instant now) {
        String[] openai = {h.get("x-ratelimit-limit-" + measure), h.get("x-ratelimit-remaining-" + measure),
            h.get("x-ratelimit-reset-" + measure)};
        if (openai[0] != null || openai[1] != null || openai[2] != null) {
            return new Stated(count(openai[0]), count(openai[1]), openai[2] == null ? Optional.empty() : goDuration(openai[2]));
        }
        for (String name : measure.equals("requests") ? List.of("requests") : List.of("tokens", "input-tokens")) {
            String prefix = "anthropic-ratelimit-" + name + "-";
            String[] said = {h.get(prefix + "limit"), h.get(prefix + "remaining"), h.get(prefix + "reset")};
            if (said[0] != null || said[1] != null || said[2] != null) {
                return new Stated(count(said[0]), count(said[1]), said[2] == null ? Optional.empty() : instantAfter(said[2], now));
            }
        }
        return Stated.NOTHING;
    }

    /**
     * Reads a provider's answer.
     *
     * @param status its HTTP status (0: no answer, as a timeout)
     * @param headers its headers, names in any case (as {@code HttpHeaders.map()} gives them)
     * @param now the clock that dates Anthropic's resets and an HTTP-date Retry-After
     * @return what it says
     */
    public static ProviderAnswer read(int status, Map<String, List<String>> headers, Instant now) {
        Map<String, String> h = new TreeMap<>();
        headers.forEach((name, values) -> {
            if (name != null && values != null && !values.isEmpty()) {
                h.put(name.toLowerCase(Locale.ROOT), values.get(0));
            }
        });
        return new ProviderAnswer(status == 429 || status == 503, waitAsked(h, now), stated(h, "requests", now),
                stated(h, "tokens", now));
    }
}
