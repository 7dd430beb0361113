#!lua flags=allow-oom
-- allow-oom: it sets at most one sentinel key per pending firing (expiring at its instant) and
-- moves the watermark.
-- Give pending firings that came within the sentinel horizon their sentinel keys, and move the
-- watermark. Firings further out live in the due ZSET alone: few TTL'd keys keep Redis's
-- expire cycle cheap, so its `expired` events (the fallback behind precision timers) stay
-- timely. A firing whose instant has passed gets no key (it is claimed directly).
-- KEYS[1] promoted watermark   KEYS[2] due zset   KEYS[3..] sentinel keys of the entries below
-- ARGV[1] instant (ms) up to which this call covers the window   ARGV[2] horizon ms
-- ARGV[3..] pairs: job id, instant ms (read from the due zset by the caller)
-- Reply: how many sentinel keys were set.
assert(#ARGV == 2 + 2 * (#KEYS - 2), 'promote: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for i = 3, #KEYS do
  local id = ARGV[2 * (i - 2) + 1]
  local at = tonumber(ARGV[2 * (i - 2) + 2])
  local score = redis.call('ZSCORE', KEYS[2], id)
  if score and tonumber(score) == at and at > now and at <= now + tonumber(ARGV[2]) then
    redis.call('SET', KEYS[i], '1', 'PXAT', at)
    n = n + 1
  end
end
local wm = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > wm then redis.call('SET', KEYS[1], ARGV[1]) end
return n
