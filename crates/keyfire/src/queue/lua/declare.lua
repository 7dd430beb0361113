-- Declare a topic's number of partitions. The count is fixed once the topic may hold tasks in
-- its partitions: the placement of partitions on the shards depends on it. Before the queue's
-- switch to the sharded layout no topic does, so any count may be set (tasks move to the
-- partitions after the switch); after it, a topic that had tasks keeps its count.
-- KEYS[1] partitions hash   KEYS[2] topics set   KEYS[3] layout key
-- ARGV[1] topic   ARGV[2] partitions
-- Reply: {1, partitions} set (or already so)   {0, current} refused: the count is fixed
assert(#KEYS == 3 and #ARGV == 2, 'declare: wrong arity')
local want = tonumber(ARGV[2])
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '1')
if cur == want then return {1, want} end
local fixed = redis.call('EXISTS', KEYS[3]) == 1 and redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1
if fixed then return {0, cur} end
if want == 1 then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], want)
end
return {1, want}
