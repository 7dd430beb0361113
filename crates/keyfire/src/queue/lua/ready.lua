-- No allow-oom, on purpose: at maxmemory Redis refuses a script without flags only at a first write
-- that may grow memory, and lets one that wrote once finish. 'create' (a new task) starts with the
-- task's HSET, so it is refused (the `topic` handler's run fails); 'promote' starts with the ZREM
-- out of the delayed set, so it runs.
-- Make one task ready through the `topic` handler: when a recurring job feeds the topic
-- ('create': a new ready task), or when the one-shot keyfire job of a task queued by an earlier
-- version fires ('promote'; such tasks are in the topic's delayed set too, so the topic's own
-- promotion may have moved them already).
-- Idempotent, so an at-least-once re-run of the same firing never makes a task ready twice:
-- 'promote' acts only when it takes the id out of the delayed set, 'create' only on a new id.
-- KEYS[1] task hash   KEYS[2] delayed zset   KEYS[3] ready zset   KEYS[4] notify list
-- KEYS[5] lane stats hash (not written: tasks added are derived; the caller put the topic into
--   the topic set first)
-- ARGV[1] task id   ARGV[2] 'promote' | 'create'   ARGV[3] topic
-- ARGV[4] most wake-up tokens kept in the notify list
-- 'create' also: ARGV[5] payload JSON   ARGV[6] ttr ms   ARGV[7] max deliveries   ARGV[8] due ms
-- Reply: {1, now} made ready
--        {0, state} left as it is: state 'missing' when there is no record, 'topic' when the
--        record belongs to another topic, 'promoted' when it left the delayed set already
assert(#KEYS == 5 and #ARGV >= 4, 'ready: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HGET', KEYS[1], 'state')
if ARGV[2] == 'create' then
  assert(#ARGV == 8, 'ready: wrong arity for create')
  if state then return {0, state} end
  redis.call('HSET', KEYS[1], 'state', 'ready', 'topic', ARGV[3], 'payload', ARGV[5], 'ttr', ARGV[6],
    'max', ARGV[7], 'deliveries', 0, 'created', now, 'due', tonumber(ARGV[8]), 'ready_at', now)
else
  if state ~= 'delayed' then return {0, state or 'missing'} end
  if redis.call('HGET', KEYS[1], 'topic') ~= ARGV[3] then return {0, 'topic'} end
  if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return {0, 'promoted'} end
  redis.call('HSET', KEYS[1], 'state', 'ready', 'ready_at', now)
end
redis.call('ZADD', KEYS[3], now, ARGV[1])
if redis.call('LLEN', KEYS[4]) < tonumber(ARGV[4]) then redis.call('RPUSH', KEYS[4], 1) end
return {1, now}
