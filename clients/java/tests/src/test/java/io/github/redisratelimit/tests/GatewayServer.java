package io.github.redisratelimit.tests;

/**
 * The server with the module that the gateway tests share (Spring Cloud Gateway's own included,
 * through the Testcontainers stand-in): started on first use, stopped when the test JVM exits.
 */
public final class GatewayServer {
    private static Server server;

    private GatewayServer() {
    }

    /**
     * Its port on 127.0.0.1.
     *
     * @return the port
     */
    public static synchronized int port() {
        if (server == null) {
            server = Server.start(true, false);
        }
        return server.port;
    }
}
