#!lua flags=allow-oom
-- allow-oom: it moves the expiry of a slot that exists (`XX`).
-- Extend the slot a running firing holds, together with its run's lease.
-- KEYS[1] in-flight zset
-- ARGV[1] firing id   ARGV[2] slot lease ms
-- Reply: 1 renewed, 0 the firing holds no slot (it expired or was given back)
assert(#KEYS == 1 and #ARGV == 2, 'limit_renew: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZADD', KEYS[1], 'XX', 'CH', now + tonumber(ARGV[2]), ARGV[1])
