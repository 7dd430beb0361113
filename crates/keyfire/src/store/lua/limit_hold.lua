-- Hold back a claimed firing that its limit key denied: queue the same attempt again in
-- the retry zset, due when the limiter suggested, without counting a run or a failure.
-- Fenced like complete.lua: the lease record must name this node and attempt. Only the
-- lease is given up; the firing keeps its place in the limit key's line (its waiters zset).
-- KEYS[1] running zset   KEYS[2] attempts hash   KEYS[3] retry zset   KEYS[4] job hash
-- ARGV[1] firing id   ARGV[2] node id   ARGV[3] attempt   ARGV[4] wait ms
-- Reply: {1, due ms} held | {0} fenced (the run is no longer this node's)
assert(#KEYS == 4 and #ARGV == 4, 'limit_hold: wrong arity')
local fid = ARGV[1]
local cur = redis.call('HGET', KEYS[2], fid)
if not cur then return {0} end
local attempt, node = string.match(cur, '^(%d+):%d+:(.*)$')
if attempt ~= ARGV[3] or node ~= ARGV[2] then return {0} end
if redis.call('ZREM', KEYS[1], fid) == 0 then return {0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = now + math.max(tonumber(ARGV[4]), 0)
redis.call('HSET', KEYS[2], fid, attempt)
redis.call('ZADD', KEYS[3], due, fid)
if redis.call('HGET', KEYS[4], 'active') == fid then redis.call('HDEL', KEYS[4], 'active') end
return {1, due}
