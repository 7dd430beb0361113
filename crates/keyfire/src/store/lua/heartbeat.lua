#!lua flags=allow-oom
-- allow-oom: a beat replaces the node's own entries (its live-set score, its info hash) and
-- trims the set; it grows memory only when a node joins or the data marker is missing. A full
-- Redis must not make every node fence itself.
-- Announce a node (or its leaving) and read the live set, by Redis's clock. The info hash's
-- `seen` says the node is alive: a node that is draining has left the live set (it owns no
-- firings) but still beats, so its runs are not taken from it; `seen` older than node_ttl
-- means its runs may be taken over (the node fenced itself before then).
-- The data marker names the data under this prefix: written once (by the first beat that
-- finds it missing), so a node that reads another id than the one it knows learns that the
-- data it wrote is gone (Redis restarted empty, FLUSHALL, a failover to an empty replica,
-- another Redis behind the same address).
-- KEYS[1] nodes zset   KEYS[2] this node's info hash   KEYS[3] data marker
-- ARGV[1] node id   ARGV[2] node ttl ms   ARGV[3] info JSON
-- ARGV[4] '0' a heartbeat, '1' leaving or draining (out of the live set, still alive),
--         '2' gone (drained: nothing of it is left to take over)
-- ARGV[5] change channel: a node joining or leaving is announced on it, so the others
--         re-read the live set at once and the firings it owned (or now owns) move without
--         waiting for their next heartbeat.
-- ARGV[6] a fresh id, written as the data marker when there is none
-- Reply: {now, lapsed, data marker, live node id...}; lapsed is 1 when this heartbeat found
-- the node's live-set entry missing or older than node_ttl (others may have taken its runs
-- over), else 0.
assert(#KEYS == 3 and #ARGV == 6, 'heartbeat: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local lapsed = 0
local function announce(what)
  redis.call('SPUBLISH', ARGV[5], cjson.encode({op = 'nodes', id = ARGV[1], what = what}))
end
local data = redis.call('GET', KEYS[3])
if not data then
  data = ARGV[6]
  redis.call('SET', KEYS[3], data)
end
if ARGV[4] ~= '0' then
  if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then announce('leave') end
  if ARGV[4] == '2' then
    redis.call('DEL', KEYS[2])
  else
    redis.call('HSET', KEYS[2], 'info', ARGV[3], 'seen', now, 'draining', 1)
    redis.call('PEXPIRE', KEYS[2], ttl * 10)
  end
else
  local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if not score or tonumber(score) < now - ttl then
    lapsed = 1
    announce('join')
  end
  redis.call('ZADD', KEYS[1], now, ARGV[1])
  redis.call('HSET', KEYS[2], 'info', ARGV[3], 'seen', now)
  redis.call('HDEL', KEYS[2], 'draining')
  redis.call('PEXPIRE', KEYS[2], ttl * 10)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl * 10)
local live = redis.call('ZRANGEBYSCORE', KEYS[1], now - ttl, '+inf')
table.insert(live, 1, data)
table.insert(live, 1, lapsed)
table.insert(live, 1, now)
return live
