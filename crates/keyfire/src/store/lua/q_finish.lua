-- Acknowledge a reserved task: it is done, out of the reserved set, its payload dropped and its
-- record kept for the retention (so `get` shows it done and a retried finish succeeds).
-- Fenced by the reservation token: a consumer whose reservation expired (the task went back to
-- ready, maybe to another consumer) or who shows a wrong token is refused.
-- KEYS[1] task hash   KEYS[2] reserved zset   KEYS[3] topic stats hash
-- ARGV[1] task id   ARGV[2] token   ARGV[3] retention ms of the done record (0: delete it now)
-- Reply: {1, now} done (also when it was done already under this token)
--        {0, state} refused: not reserved under this token   {-1, 'missing'} no such task
assert(#KEYS == 3 and #ARGV == 3, 'q_finish: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = redis.call('HMGET', KEYS[1], 'state', 'token')
if not f[1] then return {-1, 'missing'} end
if f[2] ~= ARGV[2] then return {0, f[1]} end
if f[1] == 'done' then return {1, now} end
if f[1] ~= 'reserved' then return {0, f[1]} end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[3], 'done', 1)
if tonumber(ARGV[3]) <= 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'state', 'done', 'finished_at', now)
  redis.call('HDEL', KEYS[1], 'payload', 'deadline')
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return {1, now}
