-- Record the end of attempts, one or a batch: release each lease, then finish the firing,
-- schedule its next attempt, or move it to the job's dead letters; append to the job's
-- history. Fenced by the lease record ("<attempt>:<claimed ms>:<node>" in the attempts
-- hash, see claim.lua): if it does not name this node and attempt (the run was taken over,
-- or its firing queued again), that outcome is refused and changes nothing.
-- KEYS[1] running zset   KEYS[2] attempts hash   KEYS[3] retry zset   KEYS[4] done zset
-- then per attempt i (base b = 4 + 3 * (i - 1)):
--   KEYS[b+1] job hash   KEYS[b+2] run history list   KEYS[b+3] dead letters list
-- ARGV[1] history limit   ARGV[2] dead-letter limit   ARGV[3] history max age ms
-- then per attempt i (base a = 3 + 8 * (i - 1)):
--   ARGV[a+1] firing id   ARGV[a+2] node id   ARGV[a+3] attempt
--   ARGV[a+4] outcome (ok | failed | timeout | cancelled)   ARGV[a+5] run record JSON (an object)
--   ARGV[a+6] retry delay ms, or "" for no further attempt   ARGV[a+7] job id
--   ARGV[a+8] dead-letter entry JSON (an object; used when the firing is dead)
-- Reply: per attempt, two values: fate (done | retry | dead | fenced | gone) and Redis time
-- (ms); gone: the job was deleted while it ran.
local n = (#KEYS - 4) / 3
assert(n >= 1 and n == math.floor(n) and #ARGV == 3 + 8 * n, 'complete: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local history, dead_limit, max_age = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])

-- Append fields to a JSON object given as text (cheaper than a cjson round trip).
local function with(json, extra)
  return string.sub(json, 1, -2) .. ',' .. extra .. '}'
end

local function complete(job, runs, dead, fid, node, attempt, outcome, record, retry, id, letter)
  local cur = redis.call('HGET', KEYS[2], fid)
  if not cur then
    -- A job deleted while it ran (the `topic` handler deletes its own task's job) has no
    -- attempt left to fence: nothing to record, and nothing wrong.
    if redis.call('EXISTS', job) == 0 then return 'gone' end
    return 'fenced'
  end
  -- A dead letter replayed starts again at attempt 1, while a stale run of attempt 1 (its
  -- node froze past the lease) may still end: the attempt number alone does not tell them
  -- apart. The record names its holder: a stale run finds another holder, or none (the
  -- replay is queued, not yet claimed).
  local held, holder = string.match(cur, '^(%d+):%d+:(.*)$')
  if held ~= attempt or holder ~= node then return 'fenced' end
  if redis.call('ZREM', KEYS[1], fid) == 0 then return 'fenced' end
  local fields = redis.call('HMGET', job, 'active', 'status', 'once')
  local exists = fields[2] ~= false
  if fields[1] == fid then redis.call('HDEL', job, 'active') end
  local fate = 'done'
  local extra = '"finished_ms":' .. now
  if exists and outcome ~= 'ok' and outcome ~= 'cancelled' then
    if retry ~= '' then
      fate = 'retry'
      local due = now + tonumber(retry)
      extra = extra .. ',"retry_at_ms":' .. due
      redis.call('ZADD', KEYS[3], due, fid)
      redis.call('HSET', KEYS[2], fid, tonumber(attempt) + 1)
    else
      fate = 'dead'
      redis.call('LPUSH', dead, with(letter, '"failed_ms":' .. now))
      redis.call('LTRIM', dead, 0, dead_limit - 1)
      redis.call('HINCRBY', job, 'dead', 1)
      redis.call('HDEL', KEYS[2], fid)
    end
  else
    redis.call('HDEL', KEYS[2], fid)
  end
  if exists then
    redis.call('HINCRBY', job, 'runs', 1)
    if outcome ~= 'ok' then redis.call('HINCRBY', job, 'failures', 1) end
    local len = redis.call('LPUSH', runs, with(record, extra .. ',"fate":"' .. fate .. '"'))
    if len > history then redis.call('LTRIM', runs, 0, history - 1) end
    -- Bounded by age too: drop the oldest records past the maximum age (the one just
    -- written is new; a one-shot task's first record needs no look).
    for _ = 1, math.min(len - 1, 100) do
      local tail = redis.call('LINDEX', runs, -1)
      local finished = tail and tonumber(string.match(tail, '"finished_ms":(%d+)'))
      if not finished or finished >= now - max_age then break end
      redis.call('RPOP', runs)
    end
    if fate == 'done' and outcome == 'ok' and fields[2] == 'finished' and fields[3] == '1' then
      redis.call('ZADD', KEYS[4], now, id)
    end
  end
  return fate
end

local reply = {}
for i = 1, n do
  local b = 4 + 3 * (i - 1)
  local a = 3 + 8 * (i - 1)
  reply[#reply + 1] = complete(KEYS[b + 1], KEYS[b + 2], KEYS[b + 3],
    ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7],
    ARGV[a + 8])
  reply[#reply + 1] = now
end
return reply
