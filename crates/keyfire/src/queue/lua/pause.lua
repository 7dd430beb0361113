#!lua flags=allow-oom
-- allow-oom: a pause writes one field and clears a list; a resume removes the field and pushes a
-- capped number of wake-up tokens.
-- Pause or resume one lane of a topic. The flag is the field `paused` of the lane's stats hash
-- (its value: when it was paused, Redis time), a key every pop script call has already, so a pop
-- checks it atomically and a topic that is not paused costs nothing more.
--   'pause': pops of the lane reserve nothing until the resume; adds, promotions, redeliveries,
--     finishes and touches go on as ever. The notify list is cleared: its tokens announce nothing
--     while paused (a pop clears those pushed meanwhile).
--   'resume': the flag goes, and the lane's waiting consumers are woken as a ready add wakes them
--     (a token per ready task, capped), so they take the ready tasks in order.
-- KEYS[1] lane stats hash   KEYS[2] ready zset   KEYS[3] notify list
-- ARGV[1] 'pause' | 'resume'   ARGV[2] most wake-up tokens kept
-- Reply: {changed (1|0: it was so already), now}
assert(#KEYS == 3 and #ARGV == 2, 'pause: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] == 'pause' then
  if redis.call('HSETNX', KEYS[1], 'paused', now) == 0 then return {0, now} end
  redis.call('DEL', KEYS[3])
  return {1, now}
end
assert(ARGV[1] == 'resume', 'pause: unknown mode')
if redis.call('HDEL', KEYS[1], 'paused') == 0 then return {0, now} end
local n = math.min(tonumber(ARGV[2]) - redis.call('LLEN', KEYS[3]), redis.call('ZCARD', KEYS[2]))
if n > 0 then
  local tokens = {}
  for j = 1, n do tokens[j] = 1 end
  redis.call('RPUSH', KEYS[3], unpack(tokens))
end
return {1, now}
