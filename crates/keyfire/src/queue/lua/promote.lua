#!lua flags=allow-oom
-- allow-oom: it moves due tasks from the delayed set to the ready set (the removal before the add),
-- with a capped wake-up list, one due-index entry per lane and one sentinel key per tag.
-- Promote a topic: move every task of its delayed set that is due by Redis's clock (up to a
-- batch) to its ready set, scored by this instant (when they became ready). The move is the
-- claim: a task leaves the delayed set once, so concurrent promotions (an expiry event on one
-- node, a timer or a sweep on another) never make it ready twice, and one found not yet due
-- stays where it is. Task records are not touched: a record whose state says 'delayed' is
-- ready while its id is in the ready set.
-- Then the lane's entry in the due index is set to its earliest work (the next due instant or
-- the first reservation deadline), or removed when it holds none, and the tag's sentinel key set
-- to expire at the index's head when that is later than now and not what it holds.
-- KEYS[1] delayed zset   KEYS[2] ready zset   KEYS[3] notify list   KEYS[4] the tag's sentinel key
-- KEYS[5] reserved zset   KEYS[6] the tag's due index   KEYS[7] lane stats hash (read: the flag
--   `prio`, set by an add of a delayed task with a priority; only then are the delayed set's
--   scores read, `due + p/16`, and each task placed `p * 2^44` ahead in the ready set)
-- ARGV[1] most tasks moved   ARGV[2] most wake-up tokens kept   ARGV[3] the lane's id in the
-- due index
-- Reply: {moved, now, next due instant or -1, more due now (1|0)}
assert(#KEYS == 7 and #ARGV == 3, 'promote: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A priority's fraction (at most 9/16) is below 1 ms: `now + 0.9` takes every task due by now.
local due, pairs_ = {}, {}
if redis.call('HEXISTS', KEYS[7], 'prio') == 1 then
  local got = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now + 0.9, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
  for i = 1, #got, 2 do
    local score = tonumber(got[i + 1])
    local pri = math.floor((score - math.floor(score)) * 16 + 0.5)
    due[#due + 1] = got[i]
    pairs_[#pairs_ + 1] = string.format('%d', now - pri * 17592186044416)
    pairs_[#pairs_ + 1] = got[i]
  end
else
  due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
  -- The score as text, formatted once ('%d': a Lua number passed to redis.call is written
  -- with a float's format, per task).
  local now_s = string.format('%d', now)
  for i, id in ipairs(due) do
    pairs_[2 * i - 1] = now_s
    pairs_[2 * i] = id
  end
end
local moved = #due
if moved > 0 then
  for j = 1, moved, 1000 do
    local last = math.min(j + 999, moved)
    redis.call('ZREM', KEYS[1], unpack(due, j, last))
    redis.call('ZADD', KEYS[2], unpack(pairs_, 2 * j - 1, 2 * last))
  end
  local n = math.min(tonumber(ARGV[2]) - redis.call('LLEN', KEYS[3]), moved)
  if n > 0 then
    local tokens = {}
    for j = 1, n do tokens[j] = 1 end
    redis.call('RPUSH', KEYS[3], unpack(tokens))
  end
end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local next_due, more = -1, 0
if head[2] then
  next_due = math.floor(tonumber(head[2]))
  if next_due <= now then more = 1 end
end
local work = next_due
local first = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
if first[2] and (work < 0 or tonumber(first[2]) < work) then work = tonumber(first[2]) end
if work < 0 then
  redis.call('ZREM', KEYS[6], ARGV[3])
else
  redis.call('ZADD', KEYS[6], work, ARGV[3])
end
local first_due = redis.call('ZRANGE', KEYS[6], 0, 0, 'WITHSCORES')
if first_due[2] then
  local at = tonumber(first_due[2])
  if at > now and tonumber(redis.call('GET', KEYS[4])) ~= at then
    redis.call('SET', KEYS[4], at, 'PXAT', at)
  end
end
return {moved, now, next_due, more}
