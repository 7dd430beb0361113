#!lua flags=allow-oom
-- allow-oom: it copies a task that exists (taken out of its old lane by take.lua) into its
-- partition; the mover removes the original after each batch, so at most one batch (500 tasks)
-- exists twice. Moving tasks must not stop half way because Redis is full.
-- Copy a task taken out of its topic's meta-tag lane (`take.lua`) into its partition: its
-- record as it was, its entry in the delayed set (due instant) or the ready set (when it became
-- ready). Idempotent by id: a task whose record exists here already is left as it is, so a
-- copy made again after a mover stopped half way adds nothing.
-- KEYS[1] task hash   KEYS[2] delayed zset   KEYS[3] ready zset   KEYS[4] notify list
-- KEYS[5] the tag's sentinel key   KEYS[6] the tag's due index
-- ARGV[1] task id   ARGV[2] 'd' | 'r'   ARGV[3] score   ARGV[4] most wake-up tokens kept
-- ARGV[5] the lane's id in the due index   ARGV[6..] the record, field/value pairs
-- Reply: 1 copied, 0 there already
assert(#KEYS == 6 and #ARGV >= 7 and #ARGV % 2 == 1, 'adopt: wrong arity')
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 6))
local score = tonumber(ARGV[3])
if ARGV[2] == 'd' then
  redis.call('ZADD', KEYS[2], score, ARGV[1])
  redis.call('ZADD', KEYS[6], 'LT', score, ARGV[5])
  local wake = tonumber(redis.call('GET', KEYS[5]))
  if not wake or score < wake then
    redis.call('SET', KEYS[5], score, 'PXAT', math.max(score, 1))
  end
else
  redis.call('ZADD', KEYS[3], score, ARGV[1])
  if redis.call('LLEN', KEYS[4]) < tonumber(ARGV[4]) then redis.call('RPUSH', KEYS[4], 1) end
end
return 1
