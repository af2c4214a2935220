package io.github.redisratelimit.tests;

import java.util.List;
import org.springframework.core.io.ClassPathResource;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.data.redis.core.script.RedisScript;
import org.springframework.scripting.support.ResourceScriptSource;

/** What Spring Cloud Gateway's own {@code RedisRateLimiter} runs on, made as its auto-configuration makes it. */
final class GatewayScript {
    private GatewayScript() {
    }

    /** Its Lua script, from its jar. */
    @SuppressWarnings({ "unchecked", "rawtypes" })
    static RedisScript<List<Long>> script() {
        DefaultRedisScript script = new DefaultRedisScript<>();
        script.setScriptSource(new ResourceScriptSource(new ClassPathResource("META-INF/scripts/request_rate_limiter.lua")));
        script.setResultType(List.class);
        return script;
    }

    /** Spring Data Redis's connection factory for the server on {@code port}, started. */
    static LettuceConnectionFactory factory(int port) {
        LettuceConnectionFactory factory = new LettuceConnectionFactory(new RedisStandaloneConfiguration("127.0.0.1", port));
        factory.afterPropertiesSet();
        factory.start();
        return factory;
    }
}
