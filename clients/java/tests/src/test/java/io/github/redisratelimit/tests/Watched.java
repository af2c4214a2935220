package io.github.redisratelimit.tests;

import io.github.redisratelimit.spi.Transport;
import java.util.List;
import java.util.concurrent.CompletionStage;
import java.util.function.Consumer;
import java.util.function.Function;

/** An adapter's transport that shows the tests every command sent through it. */
record Watched(Transport inner, Consumer<List<String>> watcher) implements Transport {
    @Override
    public CompletionStage<Object> send(int keyPos, List<String> args) {
        watcher.accept(args);
        return inner.send(keyPos, args);
    }

    @Override
    public CompletionStage<Void> eachPrimary(Function<Transport, CompletionStage<Void>> fn) {
        return inner.eachPrimary(fn);
    }

    @Override
    public boolean cluster() {
        return inner.cluster();
    }
}
