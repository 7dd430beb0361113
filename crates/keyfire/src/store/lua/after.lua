-- No allow-oom: it creates a task. At maxmemory Redis refuses it at its first write, before it
-- wrote anything (507 redis_full).
-- Create a one-shot task that runs after another one-shot task of its shard (its `after_task`)
-- succeeded, atomically with reading how that task stands (fanin_lib.lua):
-- - it has not ended (pending, running, waiting for a retry, or waiting itself): the new task
--   is a job hash of status `waiting` (`wait_for` that task, `wait_ms` its delay after the
--   release), listed under that task in the shard's `{tag}:after` hash;
-- - it succeeded: the new task is due after its delay from now, as any task;
-- - it ended otherwise (dead, cancelled): the new task is created and moved to its dead letters
--   at once, with the reason.
-- A task's end is its newest history record's fate (`done` or `dead`; a `retry` is not an end).
-- KEYS[1] the new task's job hash   KEYS[2] due zset   KEYS[3] jobs index
-- KEYS[4] generation counter   KEYS[5] the awaited task's job hash   KEYS[6] its compact
--   bucket hash   KEYS[7] its run history   KEYS[8] the new task's compact bucket hash
-- ARGV[1] the new task's id   ARGV[2] its spec JSON   ARGV[3] creation instant ms
-- ARGV[4] the awaited task's id   ARGV[5] the new task's delay after the release (ms)
-- ARGV[6] change channel
-- Reply: {'exists'} the id is taken (nothing written) | {'missing'} no such awaited task |
--   {'recurring'} the awaited job is not one-shot | {'waiting'} | {'due', ms} | {'dead'}
assert(#KEYS == 8 and #ARGV == 6, 'after: wrong arity')
local id, awaited = ARGV[1], ARGV[4]
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('HEXISTS', KEYS[8], id) == 1 then
  return {'exists'}
end
local f = redis.call('HMGET', KEYS[5], 'once', 'status')
local compact = redis.call('HEXISTS', KEYS[6], awaited) == 1
if not f[1] and not compact then return {'missing'} end
if f[1] and f[1] ~= '1' then return {'recurring'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_s = string.format('%d', now)
local last = redis.call('LINDEX', KEYS[7], 0) or ''
-- How it ended: ok, dead or cancelled; nil while it has not.
local result = nil
if f[2] ~= 'waiting' then
  if string.find(last, '"fate":"dead"', 1, true) then
    result = 'dead'
  elseif string.find(last, '"fate":"done"', 1, true) then
    result = string.find(last, '"outcome":"ok"', 1, true) and 'ok' or 'cancelled'
  end
end
local gen = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[1], 'created', ARGV[3], 'gen', gen, 'spec', ARGV[2], 'version', 1,
  'updated', now_s, 'once', '1', 'status', 'waiting', 'next', '', 'wait_for', awaited,
  'wait_ms', ARGV[5])
redis.call('ZADD', KEYS[3], 0, id)
local tag = fanin_tag(KEYS[2])
local after = tag .. ':after'
local list = redis.call('HGET', after, awaited)
redis.call('HSET', after, awaited, list and (list .. ' ' .. id) or id)
if not result then return {'waiting'} end
-- Ended already: the new task learns it as a waiter does.
task_ended(tag, awaited, '', result, now, ARGV[6])
if result == 'ok' then return {'due', redis.call('HGET', KEYS[1], 'next')} end
return {'dead'}
