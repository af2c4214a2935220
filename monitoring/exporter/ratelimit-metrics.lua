-- redis_exporter's --script for redis-ratelimit: every numeric field of INFO ratelimit, as the
-- series redis_script_values{key="ratelimit_<field>"} (docs/operations.md, "Monitoring").
-- The per-command lines (decisions_hit:admitted=...) and the two words (clock, guard_heal_at)
-- are left out: each has numeric fields of its own. On a server without the module, nothing.
local values = {}
for name, value in string.gmatch(redis.call('INFO', 'ratelimit'), '(ratelimit_[%w_]+):(%d+)\r?\n') do
    values[#values + 1] = name
    values[#values + 1] = value
end
return values
