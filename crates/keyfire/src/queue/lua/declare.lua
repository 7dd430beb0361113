-- No allow-oom: it adds a topic's partition count. At maxmemory Redis refuses it at its first write
-- (507 redis_full).
-- Declare a topic's number of partitions. It is set once and never changed: the placement of
-- partitions on the shards depends on it, and a queue that read the count a moment before
-- must not place a task where the others no longer look. A queue that has not heard of the
-- count yet sees one partition, and partition 0 is where it is whatever the count, so only
-- the step from the default (1) to a count is safe, and only while the topic can hold no
-- tasks in partitions past the first: before its first task, or before the queue's switch to
-- the sharded layout (until then every topic lives under the meta tag).
-- KEYS[1] partitions hash   KEYS[2] topics set   KEYS[3] layout key
-- ARGV[1] topic   ARGV[2] partitions
-- Reply: {1, partitions} set (or already so)   {0, current} refused: the count is fixed
assert(#KEYS == 3 and #ARGV == 2, 'declare: wrong arity')
local want = tonumber(ARGV[2])
local set = redis.call('HGET', KEYS[1], ARGV[1])
local cur = tonumber(set or '1')
if cur == want then return {1, want} end
if set then return {0, cur} end
if redis.call('EXISTS', KEYS[3]) == 1 and redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return {0, cur}
end
redis.call('HSET', KEYS[1], ARGV[1], want)
return {1, want}
