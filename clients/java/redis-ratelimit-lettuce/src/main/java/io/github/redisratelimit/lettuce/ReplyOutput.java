package io.github.redisratelimit.lettuce;

import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.CommandOutput;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

/**
 * Any reply as the core reads it: Long, String, Boolean, Double, null, and arrays (maps and sets
 * too, a map as its names and values in a row) as nested lists, counted element by element.
 */
final class ReplyOutput extends CommandOutput<String, String, Object> {
    /** An array being filled, and how many of its elements are still to come. */
    private static final class Open {
        final List<Object> items;
        int left;

        Open(List<Object> items, int left) {
            this.items = items;
            this.left = left;
        }
    }

    private final Deque<Open> open = new ArrayDeque<>();

    ReplyOutput() {
        super(StringCodec.UTF8, null);
    }

    private void attach(Object value) {
        Open top = open.peek();
        if (top == null) {
            output = value;
        } else {
            top.items.add(value);
            top.left--;
        }
    }

    /** Closes the arrays whose last element has come. */
    private void closeFinished() {
        while (!open.isEmpty() && open.peek().left <= 0) {
            open.pop();
        }
    }

    private void scalar(Object value) {
        attach(value);
        closeFinished();
    }

    @Override
    public void set(ByteBuffer bytes) {
        scalar(bytes == null ? null : StandardCharsets.UTF_8.decode(bytes).toString());
    }

    @Override
    public void set(long integer) {
        scalar(integer);
    }

    @Override
    public void set(double number) {
        scalar(number);
    }

    @Override
    public void set(boolean value) {
        scalar(value);
    }

    @Override
    public void multi(int count) {
        if (count < 0) {
            scalar(null);
            return;
        }
        List<Object> items = new ArrayList<>(count);
        attach(items);
        open.push(new Open(items, count));
        closeFinished();
    }
}
