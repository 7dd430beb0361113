#!lua flags=allow-oom
-- allow-oom: it moves expired reservations back to the ready set or to the dead set (entries past
-- the dead-letter retention dropped in the same step; their records expire), with a capped wake-up
-- list.
-- Take back expired reservations. Each candidate whose deadline (its score in the reserved set)
-- has passed by Redis's clock goes back to the ready set, its token revoked so the late
-- consumer's finish is refused; or, when it was delivered max-deliveries times, to the topic's
-- dead letters (state 'dead', its record kept for the dead-letter retention, with its last error
-- in `error`: which delivery's reservation expired unfinished; `finished_at` says when it died).
-- Also drops dead-letter entries older than that retention (their records expired with them).
-- A task of a batch with a completion callback (field `batch`) that goes to the dead letters
-- counts `dead` in it; the last one to end queues the callback (fanin_lib.lua, prepended).
-- KEYS[1] ready zset   KEYS[2] reserved zset   KEYS[3] dead zset   KEYS[4] notify list
-- KEYS[5] topic stats hash   KEYS[6..] task hashes of the candidates
-- ARGV[1] dead-letter retention ms   ARGV[2] most wake-up tokens kept
-- ARGV[3] max deliveries of a record that stores none (the default)
-- ARGV[4..] candidate ids (as KEYS[6..])
-- Reply: {requeued, dead, now, ids made ready...}
assert(#KEYS >= 5 and #KEYS == #ARGV + 2, 'requeue: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local retention = tonumber(ARGV[1])
local default_max = tonumber(ARGV[3])
local requeued, dead, ids = 0, 0, {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local key = KEYS[i + 2]
  local deadline = redis.call('ZSCORE', KEYS[2], id)
  if deadline and tonumber(deadline) <= now then
    redis.call('ZREM', KEYS[2], id)
    local f = redis.call('HMGET', key, 'state', 'deliveries', 'max', 'pri', 'batch')
    if f[1] == 'reserved' then
      redis.call('HDEL', key, 'token', 'deadline')
      if (tonumber(f[2]) or 0) >= (tonumber(f[3]) or default_max) then
        redis.call('HSET', key, 'state', 'dead', 'finished_at', now, 'error',
          'the reservation of delivery ' .. (tonumber(f[2]) or 0) .. ' of ' ..
          (tonumber(f[3]) or default_max) .. ' expired unfinished')
        redis.call('ZADD', KEYS[3], now, id)
        redis.call('PEXPIRE', key, retention)
        redis.call('HINCRBY', KEYS[5], 'dead', 1)
        dead = dead + 1
        if f[5] then batch_count(fanin_tag(key), f[5], 'dead', now) end
      else
        redis.call('HSET', key, 'state', 'ready', 'ready_at', now)
        -- At its priority's level (see priority.rs).
        redis.call('ZADD', KEYS[1], now - (tonumber(f[4]) or 0) * 17592186044416, id)
        redis.call('HINCRBY', KEYS[5], 'redelivered', 1)
        if redis.call('LLEN', KEYS[4]) < tonumber(ARGV[2]) then redis.call('RPUSH', KEYS[4], 1) end
        requeued = requeued + 1
        ids[#ids + 1] = id
      end
    end
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - retention)
local reply = {requeued, dead, now}
for _, id in ipairs(ids) do reply[#reply + 1] = id end
return reply
