#!lua flags=allow-oom
-- allow-oom: it moves each due callback's lease and counts its attempts (one field per callback,
-- removed with it): delivering callbacks is what empties the outbox.
-- Take the callbacks that are due in a shard's outbox (up to a batch), pushing each a lease
-- ahead so that no other node sends it meanwhile; a node that dies while sending leaves it to
-- be taken again when the lease is over. Counts each callback's attempts.
-- KEYS[1] outbox zset (callback id -> due ms)   KEYS[2] outbox hash (id -> callback JSON,
--   "<id>|tries" -> attempts taken)
-- ARGV[1] most to take   ARGV[2] lease ms
-- Reply: Redis time (ms), then per callback taken: id, attempt (1 for the first), JSON.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local out = {now}
for _, id in ipairs(ids) do
  local entry = redis.call('HGET', KEYS[2], id)
  if entry then
    local tries = redis.call('HINCRBY', KEYS[2], id .. '|tries', 1)
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), id)
    out[#out + 1] = id
    out[#out + 1] = tries
    out[#out + 1] = entry
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
