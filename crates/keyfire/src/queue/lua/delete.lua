#!lua flags=allow-oom
-- allow-oom: it removes the task from its sets and drops its payload, or deletes it: deleting is
-- how memory is freed.
-- Delete a task in any state, for good: out of whichever set holds it, its payload dropped, its
-- record kept as a 'deleted' tombstone for the retention (so a late firing of its keyfire job,
-- a late finish or a re-add of the id finds it deleted). A task queued by an earlier version
-- names its one-shot keyfire job (field `job`): the caller deletes that job, so its firing never
-- comes; a firing already running finds the task out of the delayed set and does nothing.
-- A task of a batch with a completion callback (field `batch`) deleted before it ended (delayed,
-- ready or reserved) counts `cancelled` in it; the last one to end queues the callback
-- (fanin_lib.lua, prepended). A done or dead task was counted when it ended.
-- KEYS[1] task hash   KEYS[2] delayed zset   KEYS[3] ready zset   KEYS[4] reserved zset
-- KEYS[5] dead zset   KEYS[6] topic stats hash
-- ARGV[1] task id   ARGV[2] retention ms of the tombstone (0: delete the record now)
-- Reply: {1, previous state, job id or ''} deleted   {0, 'deleted'} deleted already
--        {-1, 'missing'} no such task
assert(#KEYS == 6 and #ARGV == 2, 'delete: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = redis.call('HMGET', KEYS[1], 'state', 'job', 'batch')
if not f[1] then return {-1, 'missing'} end
if f[1] == 'deleted' then return {0, 'deleted'} end
for k = 2, 5 do redis.call('ZREM', KEYS[k], ARGV[1]) end
-- Counted only when the task was live: a topic's tasks added are derived as live + done + dead +
-- deleted, so a dead letter or a finished record deleted is not counted a second time.
if f[1] == 'delayed' or f[1] == 'ready' or f[1] == 'reserved' then
  redis.call('HINCRBY', KEYS[6], 'deleted', 1)
  if f[3] then batch_count(fanin_tag(KEYS[1]), f[3], 'cancelled', now) end
end
if tonumber(ARGV[2]) <= 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'state', 'deleted', 'finished_at', now)
  redis.call('HDEL', KEYS[1], 'payload', 'token', 'deadline')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {1, f[1], f[2] or ''}
