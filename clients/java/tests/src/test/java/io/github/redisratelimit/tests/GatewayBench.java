package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.bucket4j.BucketConfiguration;
import io.github.bucket4j.distributed.AsyncBucketProxy;
import io.github.bucket4j.distributed.ExpirationAfterWriteStrategy;
import io.github.bucket4j.redis.lettuce.Bucket4jLettuce;
import io.github.bucket4j.redis.lettuce.cas.LettuceBasedProxyManager;
import io.github.redisratelimit.AsyncRateLimiter;
import io.github.redisratelimit.gateway.NativeRedisRateLimiter;
import io.github.redisratelimit.lettuce.LettuceRateLimiters;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.event.command.CommandListener;
import io.lettuce.core.event.command.CommandStartedEvent;
import io.lettuce.core.protocol.RedisCommand;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.ReactiveStringRedisTemplate;
import org.springframework.data.redis.core.script.RedisScript;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.Pipeline;

/**
 * {@code make bench}'s Java rows: the server CPU per decision of the gateway starter's bean against
 * Spring Cloud Gateway's own {@code RedisRateLimiter} (its Lua script over two keys) and Bucket4j's
 * Lettuce proxy manager (its compare-and-swap script, retried when another client wrote between its
 * read and its write), on one hot key and on many keys, on each server.
 *
 * <p>As for the other packages: each limiter decides through its own API (16 decisions in flight,
 * every one admitted: a bucket too large to empty, the writing path), and the commands its client
 * sent are recorded (a Lettuce command listener), Bucket4j's retries among them; the recorded
 * commands are then sent again, on a clean keyspace, in pipelines of 50, and that replay's server
 * CPU (the server process's time on a CPU) is the figure. Repetitions interleave the limiters;
 * medians. Run by {@code make bench} (and, briefly, by {@code make test}) with the system
 * properties {@code bench.servers} (binaries), {@code bench.out} (the report) and
 * {@code bench.quick}; not by the tests.
 */
class GatewayBench {
    private static final int IN_FLIGHT = 16;
    private static final int MANY = 1_000;
    // A bucket no run empties, whose keys the gateway's script keeps (floor(2 * burst / rate) > 0).
    private static final long CAPACITY = 1_000_000_000L;
    private static final int RATE = 1_000_000;

    private static final int PIPELINE = 50;

    /** One limiter's decision for the identity {@code id}, admitted or not; the commands it sent. */
    private interface Contender extends AutoCloseable {
        Mono<Boolean> decide(String id);

        List<byte[][]> sent();

        @Override
        void close();
    }

    /** Every command a Lettuce client sends, as its words. */
    private static final class Recorder implements CommandListener {
        final List<byte[][]> sent = java.util.Collections.synchronizedList(new ArrayList<>());

        @Override
        public void commandStarted(CommandStartedEvent event) {
            RedisCommand<?, ?, ?> command = event.getCommand();
            List<byte[]> words = new ArrayList<>(List.of(command.getType().getBytes()));
            if (command.getArgs() != null) {
                ByteBuf buf = Unpooled.buffer();
                command.getArgs().encode(buf);
                // Each argument as RESP writes it: $<length>\r\n<bytes>\r\n.
                while (buf.isReadable()) {
                    int length = Integer.parseInt(buf.readCharSequence(buf.bytesBefore((byte) '\r'), StandardCharsets.US_ASCII)
                            .toString().substring(1));
                    buf.skipBytes(2);
                    byte[] word = new byte[length];
                    buf.readBytes(word);
                    buf.skipBytes(2);
                    words.add(word);
                }
                buf.release();
            }
            sent.add(words.toArray(byte[][]::new));
        }
    }

    private record Row(String server, String keys, String limiter, double cpuMicros, double commands) {
    }

    @Test
    void bench() throws Exception {
        boolean quick = Boolean.getBoolean("bench.quick");
        int decisions = quick ? 2_000 : 10_000;
        int reps = quick ? 1 : 3;
        String servers = System.getProperty("bench.servers", Server.binary());
        Path out = Path.of(System.getProperty("bench.out", "target/bench-java.md"));
        List<Row> rows = new ArrayList<>();
        for (String binary : servers.trim().split("\\s+")) {
            try (Server server = Server.start(binary, true, false)) {
                String name = version(server);
                for (String keys : List.of("one hot key", MANY + " keys")) {
                    IntFunction<String> id = keys.startsWith("one") ? i -> "hot" : i -> "user" + (i % MANY);
                    Map<String, List<double[]>> runs = new LinkedHashMap<>();
                    for (int rep = 0; rep < reps; rep++) {
                        List<String> limiters = List.of(SCRIPT, STARTER, BUCKET4J);
                        for (String limiter : limiters) {
                            System.err.printf("bench: the gateway starter, %s, %s: row %d/%d %s, rep %d/%d%n", name, keys,
                                    limiters.indexOf(limiter) + 1, limiters.size(), limiter, rep + 1, reps);
                            try (Contender c = contender(limiter, server.port)) {
                                measure(server, c, id, 500, "warm-up " + rep);
                                runs.computeIfAbsent(limiter, l -> new ArrayList<>()).add(measure(server, c, id, decisions, keys + rep));
                            }
                        }
                    }
                    runs.forEach((limiter, measured) -> rows.add(new Row(name, keys, limiter,
                            median(measured, 0), median(measured, 1))));
                }
            }
        }
        Files.createDirectories(out.toAbsolutePath().getParent());
        Files.writeString(out, report(rows, decisions, reps));
        System.out.println(Files.readString(out));
        for (Row row : rows) {
            assertTrue(row.cpuMicros() > 0, "no server CPU measured: " + row);
        }
    }

    private static final String SCRIPT = "Spring Cloud Gateway's RedisRateLimiter (Lua, two keys)";
    private static final String STARTER = "this starter's bean (RATELIMIT.GCRA ALIGN, one key)";
    private static final String BUCKET4J = "Bucket4j 8.19 Lettuce proxy manager (compare-and-swap)";

    /**
     * Server CPU µs and commands per decision, over {@code n} decisions of fresh identities: their
     * commands recorded, then sent again on a clean keyspace in pipelines.
     */
    private static double[] measure(Server server, Contender c, IntFunction<String> id, int n, String run) {
        String prefix = run.replace(' ', '-') + "-" + System.nanoTime() + "-";
        int before = c.sent().size();
        long admitted = Flux.range(0, n).flatMap(i -> c.decide(prefix + id.apply(i)), IN_FLIGHT)
                .filter(Boolean::booleanValue).count().block();
        if (admitted != n) {
            throw new IllegalStateException(run + ": " + admitted + " of " + n + " admitted");
        }
        List<byte[][]> commands;
        synchronized (c.sent()) {
            commands = new ArrayList<>(c.sent().subList(before, c.sent().size()));
        }
        try (Jedis jedis = server.jedis()) {
            jedis.flushAll();
            long cpu = server.cpuNanos();
            Pipeline pipeline = jedis.pipelined();
            for (int i = 0; i < commands.size(); i++) {
                byte[][] words = commands.get(i);
                pipeline.sendCommand(() -> words[0], Arrays.copyOfRange(words, 1, words.length));
                if (i % PIPELINE == PIPELINE - 1) {
                    pipeline.sync();
                }
            }
            pipeline.sync();
            long cpuSpent = server.cpuNanos() - cpu;
            return new double[] { cpuSpent / 1e3 / n, (double) commands.size() / n };
        }
    }

    private static Contender contender(String limiter, int port) {
        LettuceConnectionFactory factory = GatewayScript.factory(port);
        ReactiveStringRedisTemplate template = new ReactiveStringRedisTemplate(factory);
        RedisScript<List<Long>> script = GatewayScript.script();
        RedisRateLimiter.Config config = new RedisRateLimiter.Config().setBurstCapacity(CAPACITY)
                .setReplenishRate(RATE);
        RedisClient client = RedisClient.create(RedisURI.create("127.0.0.1", port));
        Recorder recorder = new Recorder();
        client.addListener(recorder);
        factory.getRequiredNativeClient().addListener(recorder);
        switch (limiter) {
            case SCRIPT -> {
                RedisRateLimiter theirs = new RedisRateLimiter(template, script, null);
                theirs.getConfig().put("bench", config);
                return contender(id -> theirs.isAllowed("bench", id).map(r -> r.isAllowed()), recorder, client, factory);
            }
            case STARTER -> {
                AsyncRateLimiter async = LettuceRateLimiters.async(client.connect(), io.github.redisratelimit.RateLimiterOptions.DEFAULT);
                NativeRedisRateLimiter ours = new NativeRedisRateLimiter(async, template, script, null);
                ours.getConfig().put("bench", config);
                return contender(id -> ours.isAllowed("bench", id).map(r -> r.isAllowed()), recorder, client, factory);
            }
            default -> {
                StatefulRedisConnection<byte[], byte[]> connection = client.connect(ByteArrayCodec.INSTANCE);
                LettuceBasedProxyManager<byte[]> manager = Bucket4jLettuce.casBasedBuilder(connection)
                        .expirationAfterWrite(ExpirationAfterWriteStrategy.basedOnTimeForRefillingBucketUpToMax(Duration.ofSeconds(10)))
                        .build();
                BucketConfiguration bucket = BucketConfiguration.builder()
                        .addLimit(l -> l.capacity(CAPACITY).refillGreedy(RATE, Duration.ofSeconds(1))).build();
                return contender(id -> {
                    AsyncBucketProxy proxy = manager.asAsync().builder()
                            .build(id.getBytes(StandardCharsets.UTF_8), () -> CompletableFuture.completedFuture(bucket));
                    return Mono.fromFuture(() -> proxy.tryConsume(1));
                }, recorder, client, factory);
            }
        }
    }

    private static Contender contender(java.util.function.Function<String, Mono<Boolean>> decide, Recorder recorder,
            RedisClient client, LettuceConnectionFactory factory) {
        return new Contender() {
            @Override
            public Mono<Boolean> decide(String id) {
                return decide.apply(id);
            }

            @Override
            public List<byte[][]> sent() {
                return recorder.sent;
            }

            @Override
            public void close() {
                client.shutdown();
                factory.destroy();
            }
        };
    }


    private static String version(Server server) {
        try (Jedis jedis = server.jedis()) {
            String info = jedis.info("server");
            String kind = info.contains("valkey_version:") ? "Valkey" : "Redis";
            String version = info.lines().filter(l -> l.startsWith(kind.equals("Valkey") ? "valkey_version:" : "redis_version:"))
                    .findFirst().orElseThrow().split(":")[1].trim();
            return kind + " " + version;
        }
    }

    private static double median(List<double[]> runs, int field) {
        double[] values = runs.stream().mapToDouble(r -> r[field]).sorted().toArray();
        return values[values.length / 2];
    }

    private static String report(List<Row> rows, int decisions, int reps) throws IOException {
        StringBuilder md = new StringBuilder("# The Spring Cloud Gateway starter against the gateway's RedisRateLimiter and Bucket4j\n\n");
        md.append("Measured ").append(LocalDate.now()).append(" by `make bench` (clients/java/tests, GatewayBench): ")
                .append(decisions).append(" decisions a run through each limiter's own API, ").append(IN_FLIGHT)
                .append(" in flight, every one admitted, on one hot key or on ").append(MANY).append(" keys; ").append(reps)
                .append(reps == 1 ? " run" : " runs, interleaved, medians")
                .append(". Their commands were recorded and sent again on a clean keyspace in pipelines of " + PIPELINE
                        + "; server CPU is the server process's time on a CPU in that replay; commands are "
                        + "the client's, Bucket4j's compare-and-swap retries among them.\n\n");
        md.append("| server | keys | limiter | server CPU µs/decision | commands/decision | × the gateway's script |\n");
        md.append("| --- | --- | --- | ---: | ---: | ---: |\n");
        List<String> targets = new ArrayList<>();
        for (Row row : rows) {
            Row peer = rows.stream().filter(r -> r.server().equals(row.server()) && r.keys().equals(row.keys())
                    && r.limiter().equals(SCRIPT)).findFirst().orElseThrow();
            md.append(String.format("| %s | %s | %s | %.2f | %.2f | %.2f |%n", row.server(), row.keys(), row.limiter(),
                    row.cpuMicros(), row.commands(), row.cpuMicros() / peer.cpuMicros()));
            if (row.limiter().equals(STARTER)) {
                double ratio = row.cpuMicros() / peer.cpuMicros();
                targets.add(String.format("| %s, %s: the starter ≤ 0.5× the gateway's script | %.2f | %s |", row.server(),
                        row.keys(), ratio, ratio <= 0.5 ? "yes" : "no"));
                if (row.keys().startsWith("one")) {
                    Row bucket4j = rows.stream().filter(r -> r.server().equals(row.server()) && r.keys().equals(row.keys())
                            && r.limiter().equals(BUCKET4J)).findFirst().orElseThrow();
                    double vs = row.cpuMicros() / bucket4j.cpuMicros();
                    targets.add(String.format("| %s, one hot key: the starter below Bucket4j (retries counted) | %.2f× | %s |",
                            row.server(), vs, vs < 1 ? "yes" : "no"));
                }
            }
        }
        md.append("\n## Targets\n\n| target | measured | met |\n| --- | ---: | :---: |\n");
        targets.forEach(t -> md.append(t).append('\n'));
        return md.toString();
    }
}
