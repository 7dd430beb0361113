-- Extend the lease of an attempt this node still holds: its lease record names this node
-- and this attempt.
-- KEYS[1] running zset   KEYS[2] attempts hash (lease records "<attempt>:<claimed ms>:<node>")
-- ARGV[1] node id   ARGV[2] firing id   ARGV[3] lease ms   ARGV[4] attempt
-- Reply: 1 renewed, 0 the lease is no longer ours (expired and taken over).
assert(#KEYS == 2 and #ARGV == 4, 'renew: wrong arity')
local record = redis.call('HGET', KEYS[2], ARGV[2])
if not record then return 0 end
local attempt, node = string.match(record, '^(%d+):%d+:(.*)$')
if attempt ~= ARGV[4] or node ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- The record and the running entry are written and removed together.
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[3]), ARGV[2])
return 1
