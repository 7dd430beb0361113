#!lua flags=allow-oom
-- allow-oom: it moves entries from the delayed and ready sets to the moving set.
-- Take tasks out of a topic's lane under the meta tag (the layout of earlier releases), to move
-- them to the topic's partitions: each candidate still in the delayed or the ready set leaves it
-- for the `moving` set (scored by this instant), so a pop of an earlier release can no longer
-- take it, and its record is returned for the partition's copy. The caller then copies it
-- (`adopt.lua`, idempotent by id) and removes the entry and the record here; an entry left in
-- `moving` by a mover that stopped half way is copied again by a later one.
-- KEYS[1] delayed zset   KEYS[2] ready zset   KEYS[3] moving zset   KEYS[4..] task hashes
-- ARGV[1..] candidate ids (as KEYS[4..])
-- Reply: {now, then per candidate: kind ('d' delayed | 'r' ready | '' not taken), score,
--         the record as field/value pairs}
assert(#KEYS >= 3 and #ARGV == #KEYS - 3, 'take: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reply = {now}
for i = 1, #ARGV do
  local id = ARGV[i]
  local kind, score = '', 0
  local due = redis.call('ZSCORE', KEYS[1], id)
  if due then
    kind, score = 'd', tonumber(due)
    redis.call('ZREM', KEYS[1], id)
  else
    local ready = redis.call('ZSCORE', KEYS[2], id)
    if ready then
      kind, score = 'r', tonumber(ready)
      redis.call('ZREM', KEYS[2], id)
    end
  end
  if kind ~= '' then redis.call('ZADD', KEYS[3], now, id) end
  reply[#reply + 1] = kind
  reply[#reply + 1] = score
  reply[#reply + 1] = redis.call('HGETALL', KEYS[3 + i])
end
return reply
