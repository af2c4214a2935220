package io.github.redisratelimit.tests;

import org.junit.platform.launcher.LauncherSession;
import org.junit.platform.launcher.LauncherSessionListener;
import reactor.blockhound.BlockHound;

/**
 * BlockHound on every test of this JVM, installed before the first one runs: a blocking call on an
 * event loop (Reactor's, Netty's: Lettuce's, the gateway's) fails the test that makes it. Installed
 * later, while Reactor's threads already wait in the JDK's queues it instruments, it breaks them.
 */
public class BlockHoundEverywhere implements LauncherSessionListener {
    @Override
    public void launcherSessionOpened(LauncherSession session) {
        BlockHound.install();
    }
}
