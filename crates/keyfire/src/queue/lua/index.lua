#!lua flags=allow-oom
-- allow-oom: it adds a node id to a set that the mark deletes, or writes one marker key.
-- The delay queue's due index (`q:due` per tag, kept by add, pop, promote and adopt) is only
-- complete once no node of an earlier release adds tasks and a walk over every topic filled in
-- what such nodes had queued. Until then each node walks every topic in its sweep.
-- 'join': put this node into the set of nodes that keep the index, and answer whether every
--         node whose heartbeat is within the window is in it (a walk that starts now may mark).
-- 'mark': after such a walk, write the marker if every live node is still in the set (then the
--         set is deleted: it would only grow with node ids).
-- Also when no node is live: nothing of an earlier release runs.
-- KEYS[1] the index marker   KEYS[2] the set of nodes that keep the index
-- KEYS[3] node heartbeat zset
-- ARGV[1] 'join' | 'mark'   ARGV[2] node id   ARGV[3] window ms
-- Reply: 1 every live node keeps the index (and, for 'mark', the marker is written), 0 not
assert(#KEYS == 3 and #ARGV == 3, 'index: wrong arity')
if redis.call('EXISTS', KEYS[1]) == 1 then return 1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] == 'join' then redis.call('SADD', KEYS[2], ARGV[2]) end
local live = redis.call('ZRANGEBYSCORE', KEYS[3], now - tonumber(ARGV[3]), '+inf')
for _, id in ipairs(live) do
  if id ~= ARGV[2] and redis.call('SISMEMBER', KEYS[2], id) == 0 then return 0 end
end
if ARGV[1] == 'mark' then
  redis.call('SET', KEYS[1], '1:' .. now)
  redis.call('DEL', KEYS[2])
end
return 1
