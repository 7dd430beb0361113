#!lua flags=allow-oom
-- allow-oom: it removes slots and rewrites one field.
-- Give back the slots of runs that ended (or were taken over): their firings leave the
-- in-flight zset at once. Also keeps a moving average of run durations, which
-- limit_acquire.lua uses to suggest when an in-flight-bound waiter's turn comes.
-- KEYS[1] conf hash   KEYS[2] in-flight zset
-- ARGV: pairs of (firing id, run duration ms or "" when unknown)
-- Reply: how many slots were given back
assert(#KEYS == 2 and #ARGV >= 2 and #ARGV % 2 == 0, 'limit_release: wrong arity')
local n = 0
local avg = tonumber(redis.call('HGET', KEYS[1], 'avg') or '')
for i = 1, #ARGV, 2 do
  n = n + redis.call('ZREM', KEYS[2], ARGV[i])
  local d = tonumber(ARGV[i + 1])
  if d then avg = avg and (avg * 0.9 + d * 0.1) or d end
end
if avg and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'avg', string.format('%.3f', avg))
end
return n
