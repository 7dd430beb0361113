#!lua flags=allow-oom
-- allow-oom: each outcome first removes its run's lease; what it adds is bounded: its history
-- record (the list trimmed to its cap in the same step), a dead letter (trimmed the same way), a
-- queued next attempt, a one-shot job's done entry (it and the job's record go at the job's
-- retention), a callback in the outbox (once per firing, removed once sent). An outcome that cannot
-- be recorded leaves its lease to expire, and the firing runs again.
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
-- A firing a cancel request flagged (cancel.lua: the cancels hash) whose run ends other than
-- in success is recorded `cancelled`, with no further attempt, whatever the run reported (the
-- handler may have failed before the request reached its node); the flag goes with the
-- outcome. The hash is looked at only when it exists: once per call.
-- Run limits: an attempt of a job with `max_runs` or `pause_after_failures` has options in the
-- "s" form ending "#<max runs>|<pause after failures>" (either may be empty). When its firing
-- ends (done or dead; not a queued retry), its instant leaves the job's open firings (see
-- claim.lua); a success of a firing that was open counts in `succeeded`, and the one that
-- makes it `max_runs` finishes the job (`stopped` max_runs, a `finish` message). A firing
-- that is dead (its last attempt failed) counts in `streak`, and the one that makes it
-- `pause_after_failures` pauses the job (`stopped` failures, a `pause` message); a success
-- sets it back to 0, a cancelled firing leaves it. One script: outcomes recorded at once on
-- several nodes count exactly.
-- Fan-in (fanin_lib.lua): a firing of a task that ends (done, or dead) counts in its batch,
-- named in its options ("@<batch id>" after the flags), and releases or dead-letters the tasks
-- waiting on it (looked up only when the shard has any: once per call).
-- KEYS[1] running zset   KEYS[2] attempts hash   KEYS[3] retry zset   KEYS[4] done zset
-- KEYS[5] outbox zset   KEYS[6] outbox hash   KEYS[7] cancels hash   KEYS[8] due zset
-- then per attempt: its job hash, its run history list, then its dead letters list if its
--   options say a dead-letter entry follows (keys and arguments an attempt does not need
--   are not sent: each costs Redis about as much as a short command's work)
-- ARGV[1] history limit   ARGV[2] dead-letter limit   ARGV[3] history max age ms
-- ARGV[4] change channel
-- then per attempt:
--   the run's lease member "<firing id>|<attempt>|<claimed ms>|<node>" (claimed ms 0: not
--     known, then the attempt and node must match a lease)
--   its job id   its run record: a JSON object without its closing brace (the script adds
--     the fields it knows, finished_ms and fate, and closes it)
--   options: "1" or "0" for a success with nothing else to do ("1": a one-shot job, whose
--     success marks it done, for the retention cleanup, which checks that it finished;
--     "0": not), else "s<outcome>|<once>|<retry>|<letter><callback>": outcome ok | failed |
--     timeout | cancelled; once "1", "0" or "" (unknown: read from the job); retry the
--     delay ms of the next attempt, or "" for none; letter "1": a dead-letter entry JSON
--     follows (an object; sent when the firing can be dead: a failure with no retry),
--     callback "1": a callback JSON follows (queued in the outbox with the outcome it
--     reports); then "@<batch id>" for a task of a batch
-- Reply: one text for the call, its words separated by spaces (one value for a node to read,
-- not two per attempt): Redis time (ms), then per attempt its fate (done | retry | dead |
-- fenced | gone); gone: the job was deleted while it ran.
assert(#KEYS >= 10 and #ARGV >= 8, 'complete: wrong arity')
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
-- Whether any firing of the shard is flagged by a cancel request.
local flagged = redis.call('EXISTS', KEYS[7]) == 1
-- Whether tasks of the shard wait on others (`after_task`).
local tag = fanin_tag(KEYS[1])
local waiting = fanin_waiting(tag)

local function complete(job, runs, dead, exact, fid, outcome, record, retry, id, letter, once,
                        callback)
  local earlier = false
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
    local attempt, node = string.match(exact, '^[^|]*|(%d+)|%d*|(.*)$')
    local member, layout = find_lease(job, fid, attempt or '', node or '')
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
  if flagged and redis.call('HDEL', KEYS[7], fid) == 1 and outcome ~= 'ok' and outcome ~= 'cancelled' then
    outcome = 'cancelled'
    record = string.gsub(record, '"outcome":"%a+"', '"outcome":"cancelled"', 1)
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
        attempt_set[#attempt_set + 1] = string.match(exact, '^[^|]*|(%d+)|') + 1
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
  local len = redis.call('LPUSH', runs, record .. ',' .. extra .. ',"fate":"' .. fate .. '"}')
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
  return fate, outcome
end

-- A job's run limits after its firing `fid` ended with `outcome` and `fate` (see the top).
local function limits(job, id, fid, outcome, fate, lim)
  if fate ~= 'done' and fate ~= 'dead' then return end
  local max, pause = string.match(lim, '^(%d*)|(%d*)$')
  assert(max, 'complete: bad run limits')
  local f = redis.call('HMGET', job, 'open', 'streak', 'status')
  local at_s = string.match(fid, ':(%d+)$')
  local counted = false
  if f[1] and f[1] ~= '' then
    local kept = {}
    for ms in string.gmatch(f[1], '%d+') do
      if ms == at_s and not counted then counted = true else kept[#kept + 1] = ms end
    end
    if counted then redis.call('HSET', job, 'open', table.concat(kept, ' ')) end
  end
  local stop = nil
  if outcome == 'ok' then
    if f[2] and f[2] ~= '0' then redis.call('HSET', job, 'streak', 0) end
    if counted and max ~= '' and redis.call('HINCRBY', job, 'succeeded', 1) >= tonumber(max)
        and (f[3] == 'active' or f[3] == 'paused') then
      stop = 'max_runs'
      redis.call('HSET', job, 'status', 'finished', 'next', '', 'updated', now_s, 'stopped', stop)
    end
  elseif fate == 'dead' and pause ~= '' then
    if redis.call('HINCRBY', job, 'streak', 1) >= tonumber(pause) and f[3] == 'active' then
      stop = 'failures'
      redis.call('HSET', job, 'status', 'paused', 'next', '', 'updated', now_s, 'paused_at', now_s,
        'stopped', stop)
    end
  end
  if stop then
    -- `next` mirrors the due entry: with both gone no claim of the pending firing succeeds
    -- (its sentinel key expires to a refused claim).
    redis.call('ZREM', KEYS[8], id)
    redis.call('SPUBLISH', ARGV[4], cjson.encode({
      op = stop == 'max_runs' and 'finish' or 'pause', id = id, reason = stop}))
  end
end

local reply = {}
local k, a = 8, 4
while a < #ARGV do
  local exact, id, record, opts = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  a = a + 4
  local job, runs, dead = KEYS[k + 1], KEYS[k + 2], nil
  k = k + 2
  local outcome, once, retry, letter, callback, lim, bid = 'ok', opts, '', '', '', nil, ''
  if string.byte(opts, 1) == 115 then
    local hash = string.find(opts, '#', 1, true)
    if hash then opts, lim = string.sub(opts, 1, hash - 1), string.sub(opts, hash + 1) end
    local at = string.find(opts, '@', 1, true)
    if at then opts, bid = string.sub(opts, 1, at - 1), string.sub(opts, at + 1) end
    local o, c, r, flags = string.match(opts, '^s(%a+)|(%d?)|(%d*)|(%d%d)$')
    assert(o, 'complete: bad options')
    outcome, once, retry = o, c, r
    if string.byte(flags, 1) == 49 then
      letter = ARGV[a + 1]
      a = a + 1
      dead = KEYS[k + 1]
      k = k + 1
    end
    if string.byte(flags, 2) == 49 then
      callback = ARGV[a + 1]
      a = a + 1
    end
  end
  -- The firing id: the lease member up to its first '|' (ids and instants hold none).
  local fid = string.sub(exact, 1, string.find(exact, '|', 1, true) - 1)
  local fate, ended = complete(job, runs, dead, exact, fid, outcome, record, retry, id, letter,
    once, callback)
  if lim then limits(job, id, fid, outcome, fate, lim) end
  if (bid ~= '' or waiting) and (fate == 'done' or fate == 'dead') then
    flush()
    task_ended(tag, id, bid, fate == 'dead' and 'dead' or ended, now, ARGV[4])
  end
  reply[#reply + 1] = fate
end
assert(a == #ARGV and k == #KEYS, 'complete: wrong arity')
flush()
return now_s .. ' ' .. table.concat(reply, ' ')
