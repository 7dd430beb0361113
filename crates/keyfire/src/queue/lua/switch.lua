#!lua flags=allow-oom
-- allow-oom: it writes the layout key once and deletes the set of upgraded nodes.
-- Switch the delay queue to the sharded layout once every live node serves it: every node
-- whose heartbeat is within the window is in the set of upgraded nodes (nodes of earlier
-- releases never join it). Also when no node is live: nothing of an earlier release runs.
-- Done once; the value records when. The switch leaves topics' tasks under the meta tag to be
-- moved by the sweep's walk over every topic, so it deletes the due index's marker (the walk
-- writes it again once nothing is left there).
-- KEYS[1] layout key   KEYS[2] upgraded node set   KEYS[3] node heartbeat zset
-- KEYS[4] the due index's marker
-- ARGV[1] window ms
-- Reply: 1 sharded (now or before), 0 a live node has not upgraded
assert(#KEYS == 4 and #ARGV == 1, 'switch: wrong arity')
if redis.call('EXISTS', KEYS[1]) == 1 then return 1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = redis.call('ZRANGEBYSCORE', KEYS[3], now - tonumber(ARGV[1]), '+inf')
for _, id in ipairs(live) do
  if redis.call('SISMEMBER', KEYS[2], id) == 0 then return 0 end
end
redis.call('SET', KEYS[1], '2:' .. now)
redis.call('DEL', KEYS[2], KEYS[4])
return 1
