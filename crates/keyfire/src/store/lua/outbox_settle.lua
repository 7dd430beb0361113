#!lua flags=allow-oom
-- allow-oom: it removes settled callbacks and moves the due instant of the others.
-- Settle callbacks a node took (outbox_take.lua): remove the ones sent or given up, schedule
-- the others' next attempt. Fenced by the attempt number: a node whose lease ran out (the
-- callback was taken again since) changes nothing.
-- KEYS[1] outbox zset   KEYS[2] outbox hash
-- ARGV: per callback, three values: id, the attempt taken, and "" (remove it) or the delay
-- (ms) before its next attempt.
-- Reply: how many were settled.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local settled = 0
for i = 1, #ARGV, 3 do
  local id, tries, delay = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('HGET', KEYS[2], id .. '|tries') == tries then
    if delay == '' then
      redis.call('ZREM', KEYS[1], id)
      redis.call('HDEL', KEYS[2], id, id .. '|tries')
    else
      redis.call('ZADD', KEYS[1], now + tonumber(delay), id)
    end
    settled = settled + 1
  end
end
return settled
