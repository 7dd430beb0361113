#!lua flags=allow-oom
-- allow-oom: it moves the deadline of a reservation that exists.
-- Extend a reservation: its deadline becomes Redis time now + the given ttr (or the task's own).
-- Fenced by the reservation token, like finish.
-- KEYS[1] task hash   KEYS[2] reserved zset
-- ARGV[1] task id   ARGV[2] token   ARGV[3] ttr ms, or '' for the task's own
-- Reply: {1, deadline} extended   {0, state} refused: not reserved under this token
--        {-1, 'missing'} no such task
assert(#KEYS == 2 and #ARGV == 3, 'touch: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = redis.call('HMGET', KEYS[1], 'state', 'token', 'ttr')
if not f[1] then return {-1, 'missing'} end
if f[1] ~= 'reserved' or f[2] ~= ARGV[2] or not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return {0, f[1]}
end
local ttr = tonumber(f[3])
if ARGV[3] ~= '' then ttr = tonumber(ARGV[3]) end
local deadline = now + ttr
redis.call('ZADD', KEYS[2], 'XX', deadline, ARGV[1])
redis.call('HSET', KEYS[1], 'deadline', deadline)
return {1, deadline}
