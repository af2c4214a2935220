package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redisratelimit.gateway.NativeRedisRateLimiter;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.cloud.gateway.filter.ratelimit.KeyResolver;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.cloud.gateway.test.PermitAllSecurityConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.http.client.ReactorResourceFactory;
import org.springframework.web.reactive.function.server.RequestPredicates;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.blockhound.BlockingOperationError;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import redis.clients.jedis.Jedis;

/**
 * A real gateway (Spring Boot, Spring Cloud Gateway, Netty) with the starter on its classpath and
 * routes in its properties, over HTTP, on the server with the module; BlockHound watching every
 * event loop for a blocking call (BlockHoundEverywhere).
 */
class GatewayTest {
    private static final HttpClient HTTP = HttpClient.newHttpClient();
    private static ConfigurableApplicationContext gateway;
    private static int port;

    /** The gateway: an upstream of its own (forwarded to), each user its own key (X-User). */
    @SpringBootConfiguration
    @EnableAutoConfiguration
    @Import(PermitAllSecurityConfiguration.class)
    static class App {
        @Bean
        KeyResolver user() {
            return exchange -> Mono.justOrEmpty(exchange.getRequest().getHeaders().getFirst("X-User"));
        }

        /** Netty's resources this context's own: closing one gateway leaves the others serving. */
        @Bean
        ReactorResourceFactory reactorResourceFactory() {
            ReactorResourceFactory resources = new ReactorResourceFactory();
            resources.setUseGlobalResources(false);
            return resources;
        }

        @Bean
        RouterFunction<ServerResponse> upstream() {
            return RouterFunctions.route(RequestPredicates.GET("/upstream"), request -> ServerResponse.ok().bodyValue("ok"));
        }
    }

    private static ConfigurableApplicationContext start(int redisPort, Map<String, List<String>> routes) {
        return start(List.of("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redisPort), routes);
    }

    /** A gateway on the server the properties {@code redis} name, with {@code routes} (their limiters' properties). */
    private static ConfigurableApplicationContext start(List<String> redis, Map<String, List<String>> routes) {
        List<String> properties = new ArrayList<>(redis);
        properties.addAll(List.of("server.port=0", "spring.data.redis.timeout=2s", "spring.data.redis.connect-timeout=2s",
                "spring.main.banner-mode=off", "logging.level.root=warn",
                // Not the application.yml of the gateway's test jar, beside on the classpath.
                "spring.config.name=gateway-test"));
        int i = 0;
        for (Map.Entry<String, List<String>> route : routes.entrySet()) {
            String prefix = "spring.cloud.gateway.server.webflux.routes[" + i++ + "].";
            properties.add(prefix + "id=" + route.getKey());
            properties.add(prefix + "uri=forward:/upstream");
            properties.add(prefix + "predicates[0]=Path=/" + route.getKey());
            properties.add(prefix + "filters[0].name=RequestRateLimiter");
            properties.add(prefix + "filters[0].args.key-resolver=#{@user}");
            for (String limiter : route.getValue()) {
                properties.add(prefix + "filters[0].args.redis-rate-limiter." + limiter);
            }
        }
        return new SpringApplicationBuilder(App.class).properties(properties.toArray(String[]::new)).run();
    }

    @BeforeAll
    static void startGateway() {
        gateway = start(GatewayServer.port(), new java.util.LinkedHashMap<>(Map.of(
                "bucket", List.of("replenishRate=1", "burstCapacity=2"),
                "minute", List.of("limit=3", "window=1m"),
                "day", List.of("limit=2", "window=day", "zone=+05:30"),
                "both", List.of("limits=2/1m,100/day"),
                "sliding", List.of("algorithm=sliding", "limit=2", "window=10s"),
                "gcra", List.of("algorithm=gcra", "replenishRate=1", "replenishPeriod=1m", "burstCapacity=2"),
                "shadow", List.of("limit=1", "window=1m", "shadow=true"))));
        port = Integer.parseInt(gateway.getEnvironment().getProperty("local.server.port"));
    }

    @AfterAll
    static void stopGateway() {
        if (gateway != null) {
            gateway.close();
        }
    }

    private static HttpResponse<String> get(int port, String path, String user) throws IOException, InterruptedException {
        HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).header("X-User", user)
                .timeout(Duration.ofSeconds(30)).build();
        return HTTP.send(request, HttpResponse.BodyHandlers.ofString());
    }

    private static List<Integer> statuses(String path, String user, int n) throws IOException, InterruptedException {
        List<Integer> statuses = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            statuses.add(get(port, path, user).statusCode());
        }
        return statuses;
    }

    private static String header(HttpResponse<?> response, String name) {
        return response.headers().firstValue(name).orElse(null);
    }

    @Test
    void blockHoundIsWatching() {
        Mono<Integer> blocking = Mono.fromCallable(() -> {
            Thread.sleep(1);
            return 1;
        }).subscribeOn(Schedulers.parallel());
        assertThrows(BlockingOperationError.class, () -> {
            try {
                blocking.block();
            } catch (RuntimeException e) {
                throw e.getCause() != null ? e.getCause() : e;
            }
        });
    }

    @Test
    void theBeanIsTheGatewaysRedisRateLimiter() {
        RedisRateLimiter bean = gateway.getBean(RedisRateLimiter.class);
        assertInstanceOf(NativeRedisRateLimiter.class, bean);
    }

    @Test
    void theGatewaysBucketAndHeaders() throws Exception {
        String user = UUID.randomUUID().toString();
        HttpResponse<String> first = get(port, "/bucket", user);
        assertEquals(200, first.statusCode());
        assertEquals("ok", first.body());
        assertEquals("1", header(first, "X-RateLimit-Remaining"));
        assertEquals("1", header(first, "X-RateLimit-Replenish-Rate"));
        assertEquals("2", header(first, "X-RateLimit-Burst-Capacity"));
        assertEquals("1", header(first, "X-RateLimit-Requested-Tokens"));
        assertEquals("\"default\";q=2;w=1", header(first, "RateLimit-Policy"));
        get(port, "/bucket", user);
        HttpResponse<String> denied = get(port, "/bucket", user);
        // Denied until the next whole second: the bucket refills there.
        if (denied.statusCode() == 429) {
            assertEquals("0", header(denied, "X-RateLimit-Remaining"));
            assertEquals("1", header(denied, "Retry-After"));
        }
    }

    @Test
    void aLimitPerMinute() throws Exception {
        String user = UUID.randomUUID().toString();
        assertEquals(List.of(200, 200, 200, 429), statuses("/minute", user, 4));
        HttpResponse<String> denied = get(port, "/minute", user);
        assertEquals(429, denied.statusCode());
        assertEquals("0", header(denied, "X-RateLimit-Remaining"));
        assertEquals("\"1m\";q=3;w=60", header(denied, "RateLimit-Policy"));
        long retry = Long.parseLong(header(denied, "Retry-After"));
        assertTrue(retry > 0 && retry <= 60, "Retry-After " + retry);
        assertEquals(List.of(200), statuses("/minute", UUID.randomUUID().toString(), 1), "each user its own");
        try (Jedis jedis = new Jedis("127.0.0.1", GatewayServer.port())) {
            assertEquals(java.util.Set.of("request_rate_limiter.{minute." + user + "}.fixed.1m"),
                    jedis.keys("request_rate_limiter.{minute." + user + "}*"), "one key, for the minute");
        }
    }

    @Test
    void aCalendarDayInAZone() throws Exception {
        String user = UUID.randomUUID().toString();
        assertEquals(List.of(200, 200, 429), statuses("/day", user, 3));
        try (Jedis jedis = new Jedis("127.0.0.1", GatewayServer.port())) {
            long ends = jedis.pexpireTime("request_rate_limiter.{day." + user + "}.fixed.day");
            assertEquals(66_600_000, ends % 86_400_000, "the day ends at midnight at +05:30: 18:30 UTC");
        }
    }

    @Test
    void severalLimitsAllOrNothing() throws Exception {
        String user = UUID.randomUUID().toString();
        assertEquals(List.of(200, 200, 429, 429), statuses("/both", user, 4));
        try (Jedis jedis = new Jedis("127.0.0.1", GatewayServer.port())) {
            assertEquals("2", jedis.get("request_rate_limiter.{both." + user + "}.fixed.day"), "denied requests count nowhere");
        }
        HttpResponse<String> denied = get(port, "/both", user);
        assertEquals("\"1m\";q=2;w=60, \"day\";q=100", header(denied, "RateLimit-Policy"));
        assertTrue(header(denied, "RateLimit").startsWith("\"1m\";r=0;t="), header(denied, "RateLimit"));
    }

    @Test
    void slidingWindowAndGcra() throws Exception {
        assertEquals(List.of(200, 200, 429), statuses("/sliding", UUID.randomUUID().toString(), 3));
        String user = UUID.randomUUID().toString();
        assertEquals(List.of(200, 200, 429), statuses("/gcra", user, 3));
        HttpResponse<String> denied = get(port, "/gcra", user);
        long retry = Long.parseLong(header(denied, "Retry-After"));
        assertTrue(retry > 0 && retry <= 60, "a token back within the minute: " + retry);
    }

    @Test
    void shadowModeAdmitsAndCounts() throws Exception {
        NativeRedisRateLimiter bean = gateway.getBean(NativeRedisRateLimiter.class);
        long before = bean.getShadowDenied();
        assertEquals(List.of(200, 200, 200), statuses("/shadow", UUID.randomUUID().toString(), 3));
        assertEquals(before + 2, bean.getShadowDenied());
    }

    @Test
    void noKeyIsDeniedAsTheGatewayDeniesIt() throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/minute")).build();
        assertEquals(403, HTTP.send(request, HttpResponse.BodyHandlers.ofString()).statusCode());
    }

    @Test
    void redisDownLetsTrafficThroughAsTheGatewayDoes() throws Exception {
        int closed;
        try (ServerSocket socket = new ServerSocket(0)) {
            closed = socket.getLocalPort();
        }
        try (ConfigurableApplicationContext down = start(closed, Map.of("bucket", List.of("replenishRate=1", "burstCapacity=1")))) {
            int downPort = Integer.parseInt(down.getEnvironment().getProperty("local.server.port"));
            for (int i = 0; i < 3; i++) {
                HttpResponse<String> response = get(downPort, "/bucket", "u");
                assertEquals(200, response.statusCode());
                assertEquals("-1", header(response, "X-RateLimit-Remaining"));
            }
        }
    }

    @Test
    void onAClusterEveryCallGoesToItsKeysPrimary() throws Exception {
        List<Server> nodes = Stack.LETTUCE_CLUSTER_MODULE.servers();
        for (Server node : nodes) {
            try (Jedis j = node.jedis()) {
                j.configResetStat();
            }
        }
        Map<String, List<String>> routes = Map.of("bucket", List.of("replenishRate=1", "burstCapacity=2"));
        // And the limiter's own property, bound as the gateway's are: no RateLimit fields.
        List<String> redis = List.of("spring.data.redis.cluster.nodes=127.0.0.1:" + nodes.get(0).port,
                "spring.cloud.gateway.server.webflux.redis-rate-limiter.include-rate-limit-headers=false");
        try (ConfigurableApplicationContext cluster = start(redis, routes)) {
            int clusterPort = Integer.parseInt(cluster.getEnvironment().getProperty("local.server.port"));
            for (int i = 0; i < 20; i++) {
                HttpResponse<String> response = get(clusterPort, "/bucket", "c" + i + "-" + UUID.randomUUID());
                assertEquals(200, response.statusCode());
                assertEquals("1", header(response, "X-RateLimit-Remaining"));
                assertEquals(null, header(response, "RateLimit-Policy"));
            }
        }
        for (Server node : nodes) {
            try (Jedis j = node.jedis()) {
                assertTrue(j.info("commandstats").contains("cmdstat_ratelimit.gcra"), "keys on every node");
                String errors = j.info("errorstats");
                assertFalse(errors.contains("errorstat_MOVED") || errors.contains("errorstat_ASK"), "no redirect: " + errors);
            }
        }
    }

    @Test
    void aRouteThatMakesNoLimiterStopsTheStart() {
        Exception e = assertThrows(Exception.class, () -> start(GatewayServer.port(), Map.of("bad", List.of("limit=5"))).close());
        Throwable cause = e;
        while (cause.getCause() != null && !String.valueOf(cause.getMessage()).contains("limit and window")) {
            cause = cause.getCause();
        }
        assertNotNull(cause.getMessage());
        assertTrue(cause.getMessage().contains("limit and window"), String.valueOf(e));
    }
}
