#!lua name=ratelimit_floors

-- What each function of functions/ratelimit.lua cannot avoid on its usual path, and nothing else:
-- the same redis.calls and the same reply, with constant texts where the library computes them
-- (no argument checks, no arithmetic, no helpers). Measured by scripts/library-floors.sh beside
-- the library and the script each one replaces: library - floor is what the library's own Lua
-- costs, floor - script what keeping the module's rules and replies costs.

-- HIT: the counter read before anything is written (a denied hit writes nothing), its TTL, then
-- INCRBY in a running window (SET with the window for a new counter); four integers answered.
redis.register_function('floor_hit', function(keys)
    local value = redis.pcall('GET', keys[1])
    local ttl, count = 0, 1
    if value then
        ttl = redis.call('PTTL', keys[1])
        count = redis.call('INCRBY', keys[1], '1')
    else
        redis.call('SET', keys[1], '1', 'PX', '60000')
    end
    return { 1, count, 5, ttl }
end)

-- HITALL, two counters (a minute and an hour): both read before either is written.
redis.register_function('floor_hitall', function(keys)
    local minute, hour = redis.pcall('GET', keys[1]), redis.pcall('GET', keys[2])
    local minute_ttl = minute and redis.call('PTTL', keys[1]) or 0
    local hour_ttl = hour and redis.call('PTTL', keys[2]) or 0
    local m, h = 1, 1
    if minute then
        m = redis.call('INCRBY', keys[1], '1')
    else
        redis.call('SET', keys[1], '1', 'PX', '60000')
    end
    if hour then
        h = redis.call('INCRBY', keys[2], '1')
    else
        redis.call('SET', keys[2], '1', 'PX', '3600000')
    end
    return { 1, { m, 5, minute_ttl }, { h, 5, hour_ttl } }
end)

-- SLIDE: the one-key value read, the server's clock, the value written with its expiry; five
-- integers answered.
redis.register_function('floor_slide', function(keys)
    redis.pcall('GET', keys[1])
    redis.call('TIME')
    redis.call('SET', keys[1], 'slide:60000:1864620000000:0:1', 'PXAT', '1864620120000')
    return { 1, 1, 5, -1, 120000 }
end)

-- ACQUIRE of a new lease (ARGV: limit, lease, 'ID', id): the clock, the id's score, the set's size,
-- the lease added, the key's expiry moved to it; and RELEASE (ARGV: id): the clock, the id's
-- score, the set's size, the lease removed.
redis.register_function('floor_acquire', function(keys, args)
    redis.call('TIME')
    redis.pcall('ZSCORE', keys[1], args[4])
    redis.call('ZCARD', keys[1])
    redis.call('ZADD', keys[1], '1864618030000', args[4])
    redis.call('PEXPIREAT', keys[1], '1864618030000')
    return { 1, 1, 999999, 30000, args[4] }
end)
redis.register_function('floor_release', function(keys, args)
    redis.call('TIME')
    redis.pcall('ZSCORE', keys[1], args[1])
    redis.call('ZCARD', keys[1])
    redis.call('ZREM', keys[1], args[1])
    return 1
end)
