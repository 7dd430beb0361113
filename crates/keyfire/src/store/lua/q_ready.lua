-- Make a task ready. The `topic` handler runs this when a delayed task's keyfire job fires
-- ('promote'), or when a recurring job feeds the topic ('create': a new ready task); the queue's
-- maintenance runs it for a delayed task whose job is gone ('orphan').
-- Idempotent, so an at-least-once re-run of the same firing never makes a task ready twice:
-- 'promote' and 'orphan' act only on a task still 'delayed', 'create' only when the id is new.
-- A ready task is scored by its due instant, so pops take the earliest due first.
-- KEYS[1] task hash   KEYS[2] delayed zset   KEYS[3] ready zset   KEYS[4] notify list
-- KEYS[5] topics set   KEYS[6] topic stats hash
-- (The task's keyfire job lives on its own shard, in another slot under Redis Cluster, so the
-- caller checks that it exists: 'orphan' passes the answer.)
-- ARGV[1] task id   ARGV[2] 'promote' | 'create' | 'orphan'   ARGV[3] topic
-- ARGV[4] most wake-up tokens kept in the notify list
-- 'create' also: ARGV[5] payload JSON   ARGV[6] ttr ms   ARGV[7] max deliveries   ARGV[8] due ms
-- 'orphan' also: ARGV[5] only if due at or before this instant (ms)
--                ARGV[6] '1' when the task's keyfire job exists (then nothing is done)
-- Reply: {1, now} made ready
--        {0, state} left as it is: state 'missing' when there is no record, 'topic' when the
--        record belongs to another topic, 'job' ('orphan') when the job exists or it is not due
assert(#KEYS == 6 and #ARGV >= 4, 'q_ready: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HGET', KEYS[1], 'state')
local due
if ARGV[2] == 'create' then
  assert(#ARGV == 8, 'q_ready: wrong arity for create')
  if state then return {0, state} end
  due = tonumber(ARGV[8])
  redis.call('HSET', KEYS[1], 'state', 'ready', 'topic', ARGV[3], 'payload', ARGV[5], 'ttr', ARGV[6],
    'max', ARGV[7], 'deliveries', 0, 'created', now, 'due', due, 'ready_at', now)
  redis.call('SADD', KEYS[5], ARGV[3])
  redis.call('HINCRBY', KEYS[6], 'added', 1)
else
  if state ~= 'delayed' then return {0, state or 'missing'} end
  if redis.call('HGET', KEYS[1], 'topic') ~= ARGV[3] then return {0, 'topic'} end
  due = tonumber(redis.call('HGET', KEYS[1], 'due'))
  if ARGV[2] == 'orphan' then
    assert(#ARGV == 6, 'q_ready: wrong arity for orphan')
    if ARGV[6] == '1' or due > tonumber(ARGV[5]) then return {0, 'job'} end
    redis.call('HINCRBY', KEYS[6], 'orphans', 1)
  end
  redis.call('HSET', KEYS[1], 'state', 'ready', 'ready_at', now)
  redis.call('ZREM', KEYS[2], ARGV[1])
end
redis.call('ZADD', KEYS[3], due, ARGV[1])
if redis.call('LLEN', KEYS[4]) < tonumber(ARGV[4]) then redis.call('RPUSH', KEYS[4], 1) end
return {1, now}
