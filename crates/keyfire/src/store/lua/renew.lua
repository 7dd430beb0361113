-- Extend the lease of an attempt this node still holds.
-- KEYS[1] lock of the firing   KEYS[2] running zset   KEYS[3] attempts hash
-- ARGV[1] node id   ARGV[2] firing id   ARGV[3] lease ms   ARGV[4] attempt
-- Reply: 1 renewed, 0 the lease is no longer ours (expired and taken over).
assert(#KEYS == 3 and #ARGV == 4, 'renew: wrong arity')
if redis.call('GET', KEYS[1]) ~= ARGV[1] .. ':' .. ARGV[4] then return 0 end
if redis.call('HGET', KEYS[3], ARGV[2]) ~= ARGV[4] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], 'XX', now + tonumber(ARGV[3]), ARGV[2])
return 1
