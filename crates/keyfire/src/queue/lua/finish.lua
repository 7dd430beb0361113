#!lua flags=allow-oom
-- allow-oom: a finish drops the task's payload and reservation (its record kept until its
-- retention) or deletes it.
-- Acknowledge reserved tasks of one topic: each is done, out of the reserved set, its payload
-- dropped and its record kept for the retention (so `get` shows it done and a retried finish
-- succeeds). Each is fenced by its own reservation token: one whose reservation expired (the
-- task went back to ready, maybe to another consumer) or that shows a wrong token is refused,
-- and the others of the batch are finished all the same.
-- A task of a batch with a completion callback (field `batch`) counts `ok` in it; the last
-- one to end queues the callback (fanin_lib.lua, prepended).
-- KEYS[1] reserved zset   KEYS[2] topic stats hash   KEYS[3..] task hashes
-- ARGV[1] retention ms of the done records (0: delete them now)
-- ARGV[2..] pairs: task id (as KEYS[3..]), token
-- Reply: {now, then per task: 1 done (also when done already under this token) |
--         0 refused (not reserved under this token) | -1 no such task | -2 deleted}
assert(#KEYS >= 2 and #ARGV == 1 + 2 * (#KEYS - 2), 'finish: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local retention = tonumber(ARGV[1])
-- Written per task as text, formatted once ('%d': a Lua number passed to redis.call is
-- written with a float's format).
local now_s = string.format('%d', now)
local reply = {now}
local gone = {}
for i = 3, #KEYS do
  local id, token = ARGV[2 * (i - 2)], ARGV[2 * (i - 2) + 1]
  local f = redis.call('HMGET', KEYS[i], 'state', 'token', 'batch')
  local code
  if not f[1] then
    code = -1
  elseif f[1] == 'deleted' then
    code = -2
  elseif f[2] ~= token then
    code = 0
  elseif f[1] == 'done' then
    code = 1
  elseif f[1] ~= 'reserved' then
    code = 0
  else
    code = 1
    gone[#gone + 1] = id
    if f[3] then batch_count(fanin_tag(KEYS[i]), f[3], 'ok', now) end
    if retention <= 0 then
      redis.call('DEL', KEYS[i])
    else
      redis.call('HSET', KEYS[i], 'state', 'done', 'finished_at', now_s)
      redis.call('HDEL', KEYS[i], 'payload', 'deadline')
      redis.call('PEXPIRE', KEYS[i], ARGV[1])
    end
  end
  reply[#reply + 1] = code
end
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('HINCRBY', KEYS[2], 'done', #gone)
end
return reply
