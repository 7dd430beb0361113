#!lua flags=allow-oom
-- allow-oom: it moves the expiry of a lease that exists (`XX`). A run whose lease cannot be renewed
-- is cancelled and taken over.
-- Extend the lease of an attempt this node still holds: the running ZSET's member
-- "<firing id>|<attempt>|<claimed ms>|<node>" (see claim.lua) names this node and attempt.
-- The caller names the claim instant when it knows it (one lookup: a run of the same node
-- and attempt claimed at another instant, such as a replayed dead letter, is not ours);
-- else the job's latest run, then the runs in progress, are searched for the attempt and
-- node. A run claimed by a node of the earlier layout (running entry: the firing id,
-- record "<attempt>:<claimed ms>:<node>" in the attempts hash) is renewed too.
-- KEYS[1] running zset   KEYS[2] attempts hash   KEYS[3] job hash
-- KEYS[4] (optional) cancels hash: a run a cancel request flagged (cancel.lua) is told so, in
--   case its node missed the announcement (its lease is renewed all the same, so it records
--   its outcome)
-- ARGV[1] node id   ARGV[2] firing id   ARGV[3] lease ms   ARGV[4] attempt
-- ARGV[5] claimed ms, or "" when the caller does not know it
-- Reply: 1 renewed, 0 the lease is no longer ours (expired and taken over), 2 renewed and
--   flagged by a cancel request.
assert((#KEYS == 3 or #KEYS == 4) and #ARGV == 5, 'renew: wrong arity')
local fid, node, attempt = ARGV[2], ARGV[1], ARGV[4]
local member = nil
if ARGV[5] ~= '' then
  local exact = fid .. '|' .. attempt .. '|' .. ARGV[5] .. '|' .. node
  if redis.call('ZSCORE', KEYS[1], exact) then member = exact end
else
  local prefix = fid .. '|' .. attempt .. '|'
  local function ours(m)
    return string.sub(m, 1, #prefix) == prefix
      and string.match(string.sub(m, #prefix + 1), '^%d+|(.*)$') == node
  end
  local active = redis.call('HGET', KEYS[3], 'active')
  if active and ours(active) and redis.call('ZSCORE', KEYS[1], active) then
    member = active
  else
    -- Job ids and instants hold no glob character.
    local cursor = '0'
    repeat
      local page = redis.call('ZSCAN', KEYS[1], cursor, 'MATCH', prefix .. '*', 'COUNT', 1000)
      cursor = page[1]
      for i = 1, #page[2], 2 do
        if ours(page[2][i]) then member = page[2][i] end
      end
    until cursor == '0' or member
  end
end
if not member then
  local held, holder = string.match(redis.call('HGET', KEYS[2], fid) or '', '^(%d+):%d+:(.*)$')
  if held ~= attempt or holder ~= node or not redis.call('ZSCORE', KEYS[1], fid) then return 0 end
  member = fid
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[3]), member)
if KEYS[4] and redis.call('HEXISTS', KEYS[4], fid) == 1 then return 2 end
return 1
