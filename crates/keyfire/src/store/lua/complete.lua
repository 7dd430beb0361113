-- Record the end of attempts, one or a batch: release each lease, then finish the firing,
-- schedule its next attempt, or move it to the job's dead letters; append to the job's
-- history. Fenced by the lease: the running ZSET's member
-- "<firing id>|<attempt>|<claimed ms>|<node>" (see claim.lua) must be there, naming this
-- node, attempt and claim; if it is not (the run was taken over, or its firing queued
-- again), that outcome is refused and changes nothing. The member's presence is the check.
-- A run claimed by a node of the earlier layout (its running entry the bare firing id, its
-- lease record "<attempt>:<claimed ms>:<node>" in the attempts hash) is completed too.
-- The writes every attempt of a call makes to the same key (its next attempt queued, its
-- one-shot job marked done) go as one command per key for the whole call; each lease is
-- removed by a ZREM of its own, whose reply is the check.
-- A lease is removed with its job (delete.lua), so a run that held its lease has a job: a
-- job hash, or a compact task's bucket field (see task_lib.lua). A compact task's success
-- writes nothing on its job hash (it has none); the caller expands one whose run failed
-- before its outcome is recorded here.
-- A callback given with an attempt is queued in the shard's outbox when the outcome is the
-- one it reports (a success; a firing that is dead), once per firing and outcome.
-- KEYS[1] running zset   KEYS[2] attempts hash   KEYS[3] retry zset   KEYS[4] done zset
-- KEYS[5] outbox zset   KEYS[6] outbox hash
-- then per attempt i (base b = 6 + 3 * (i - 1)):
--   KEYS[b+1] job hash   KEYS[b+2] run history list   KEYS[b+3] dead letters list
-- ARGV[1] history limit   ARGV[2] dead-letter limit   ARGV[3] history max age ms
-- then per attempt i (base a = 3 + 11 * (i - 1)):
--   ARGV[a+1] firing id   ARGV[a+2] node id   ARGV[a+3] attempt   ARGV[a+4] claimed ms
--   ARGV[a+5] outcome (ok | failed | timeout | cancelled)   ARGV[a+6] run record JSON (an object)
--   ARGV[a+7] retry delay ms, or "" for no further attempt   ARGV[a+8] job id
--   ARGV[a+9] dead-letter entry JSON (an object; used when the firing is dead; "" when it
--     cannot be: a success, or a failure with a retry)
--   ARGV[a+10] "1": a one-shot job (a success marks it done, for the retention cleanup,
--     which checks that it finished), "0": not, "": unknown (read from the job)
--   ARGV[a+11] callback JSON, or "" for none
-- Reply: per attempt, two values: fate (done | retry | dead | fenced | gone) and Redis time
-- (ms); gone: the job was deleted while it ran.
local n = (#KEYS - 6) / 3
assert(n >= 1 and n == math.floor(n) and #ARGV == 3 + 11 * n, 'complete: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local history, dead_limit, max_age = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
-- Formatted once per call ('%d': Lua's own number format is a float's, and costly).
local now_s = string.format('%d', now)

-- Append fields to a JSON object given as text (cheaper than a cjson round trip).
local function with(json, extra)
  return string.sub(json, 1, -2) .. ',' .. extra .. '}'
end

-- The lease of a run named by firing id, attempt and node, without its claim instant: the
-- job's latest run (its `active` field), else a scan of the running ZSET (runs in
-- progress), else a lease of the earlier layout (member: the firing id; record in the
-- attempts hash). Returns the member and whether it is of the earlier layout.
local function find_lease(job, fid, attempt, node)
  local prefix = fid .. '|' .. attempt .. '|'
  local function ours(m)
    return string.sub(m, 1, #prefix) == prefix and string.match(string.sub(m, #prefix + 1), '^%d+|(.*)$') == node
  end
  local active = redis.call('HGET', job, 'active')
  if active and ours(active) then return active, false end
  -- Job ids and instants hold no glob character.
  local cursor = '0'
  repeat
    local page = redis.call('ZSCAN', KEYS[1], cursor, 'MATCH', prefix .. '*', 'COUNT', 1000)
    cursor = page[1]
    for i = 1, #page[2], 2 do
      if ours(page[2][i]) then return page[2][i], false end
    end
  until cursor == '0'
  local held, holder = string.match(redis.call('HGET', KEYS[2], fid) or '', '^(%d+):%d+:(.*)$')
  if held == attempt and holder == node then return fid, true end
  return nil, false
end

-- Writes held back to go as one command per key: next attempts (due,
-- firing id pairs) and their attempt numbers (firing id, attempt pairs), finished one-shot
-- jobs (instant, id pairs).
local retry_add, attempt_set, done_add = {}, {}, {}
local function flush()
  if #retry_add > 0 then redis.call('ZADD', KEYS[3], unpack(retry_add)) end
  if #attempt_set > 0 then redis.call('HSET', KEYS[2], unpack(attempt_set)) end
  if #done_add > 0 then redis.call('ZADD', KEYS[4], unpack(done_add)) end
  retry_add, attempt_set, done_add = {}, {}, {}
end

-- Firings met in this call: one met again sees the writes before it (sent first).
local met = {}

local function complete(job, runs, dead, fid, node, attempt, claimed, outcome, record, retry,
                        id, letter, once, callback)
  local earlier = false
  local exact = fid .. '|' .. attempt .. '|' .. claimed .. '|' .. node
  -- Removing the lease is the check that the run still holds it: one ZREM per attempt
  -- costs Redis less than reading every lease's score (a double formatted as text) first.
  if met[fid] then flush() end
  local held = redis.call('ZREM', KEYS[1], exact) == 1
  met[fid] = true
  if not held then
    -- Not this exact lease: taken over, queued again, deleted, or named by a caller that
    -- does not know the claim instant (then the attempt and node must match), or claimed
    -- by a node of the earlier layout.
    flush()
    local member, layout = find_lease(job, fid, attempt, node)
    if not member or redis.call('ZREM', KEYS[1], member) == 0 then
      -- A job deleted while it ran (the `topic` handler deletes its own task's job) has no
      -- attempt left to fence: nothing to record, and nothing wrong. (A compact task has no
      -- job hash: one whose success was recorded has its done entry.)
      if redis.call('EXISTS', job) == 0 and not redis.call('ZSCORE', KEYS[4], id) then
        return 'gone'
      end
      return 'fenced'
    end
    if layout then
      redis.call('HDEL', KEYS[2], fid)
      earlier = true
    end
  end
  local fate = 'done'
  local extra = '"finished_ms":' .. now_s
  if outcome ~= 'ok' then
    if outcome ~= 'cancelled' then
      if retry ~= '' then
        fate = 'retry'
        local due = now + tonumber(retry)
        extra = extra .. ',"retry_at_ms":' .. due
        retry_add[#retry_add + 1] = due
        retry_add[#retry_add + 1] = fid
        attempt_set[#attempt_set + 1] = fid
        attempt_set[#attempt_set + 1] = tonumber(attempt) + 1
      else
        fate = 'dead'
        redis.call('LPUSH', dead, with(letter, '"failed_ms":' .. now_s))
        redis.call('LTRIM', dead, 0, dead_limit - 1)
        redis.call('HINCRBY', job, 'dead', 1)
      end
    end
    redis.call('HINCRBY', job, 'failures', 1)
  end
  -- The claim counted the run; a claim of the earlier layout did not.
  if earlier then redis.call('HINCRBY', job, 'runs', 1) end
  local len = redis.call('LPUSH', runs, with(record, extra .. ',"fate":"' .. fate .. '"'))
  -- Bounded by age too: drop the oldest records past the maximum age (the one just
  -- written is new; a one-shot task's first record needs no look). A full history is
  -- trimmed by count at every record, so its age is looked at in one call of 16 (by
  -- Redis's clock): a look costs a tenth of a completion, and a job that fills its
  -- history within the maximum age (most) never has a record to drop by age.
  local looks = math.min(len - 1, 100)
  if len > history then
    redis.call('LTRIM', runs, 0, history - 1)
    if now % 16 ~= 0 then looks = 0 end
  end
  for _ = 1, looks do
    local tail = redis.call('LINDEX', runs, -1)
    -- A plain find: a pattern search costs more than the rest of the completion.
    local at = tail and string.find(tail, '"finished_ms":', 1, true)
    local finished = at and tonumber(string.match(tail, '^%d+', at + 14))
    if not finished or finished >= now - max_age then break end
    redis.call('RPOP', runs)
  end
  if fate == 'done' and outcome == 'ok' then
    if once == '' then
      local f = redis.call('HMGET', job, 'status', 'once')
      -- No job hash, yet it held its lease: a compact task (one-shot).
      if not f[1] or (f[1] == 'finished' and f[2] == '1') then once = '1' end
    end
    if once == '1' then
      done_add[#done_add + 1] = now_s
      done_add[#done_add + 1] = id
    end
  end
  if callback ~= '' and (fate == 'dead' or (fate == 'done' and outcome == 'ok')) then
    local cb = fid .. (outcome == 'ok' and ':succeeded' or ':failed')
    if redis.call('HSETNX', KEYS[6], cb, callback) == 1 then
      redis.call('ZADD', KEYS[5], now_s, cb)
    end
  end
  return fate
end

local reply = {}
for i = 1, n do
  local b = 6 + 3 * (i - 1)
  local a = 3 + 11 * (i - 1)
  reply[#reply + 1] = complete(KEYS[b + 1], KEYS[b + 2], KEYS[b + 3],
    ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7],
    ARGV[a + 8], ARGV[a + 9], ARGV[a + 10], ARGV[a + 11])
  reply[#reply + 1] = now
end
flush()
return reply
