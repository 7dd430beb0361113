#!lua flags=allow-oom
-- allow-oom: a claim moves each job's due entry on to its next firing and rewrites fields its job
-- hash holds; what it adds is bounded: a lease per run in progress (removed by its outcome), one
-- sentinel key per job (its next firing's, expiring at its instant), a skipped compact task's
-- expansion (once per task). Pending work must not stop because Redis is full: running it is what
-- lets the retention cleanup free memory.
-- Claim scheduled firings, one or a batch: each at most once, ever (G1), never more than the
-- node's claim lead (ARGV[6]) before its instant by Redis's clock (G3): the node holds a run
-- claimed ahead until its instant, counted from the claim's Redis time (the reply's `now`).
-- A compare-and-set on the firing's instant is what makes it claimable once: on the job hash's `next` field, which holds its due entry's score as the
-- same digits (every script that moves or removes a job's due entry writes `next` in the
-- same step: insert, upsert, pause, task_lib's expansion and this one), or, for a compact
-- task (no job hash), on the due entry itself. The run's lease is then one entry of the running
-- ZSET: the member "<firing id>|<attempt>|<claimed ms>|<node>" names the run (renewals and
-- the outcome must name it exactly: the fence), the score is the lease expiry (for the
-- sweeper). The completion removes it. The job's `active` field holds the latest run's
-- member (the overlap policies look it up), and its `runs` counter counts the run here.
-- The job's next firing is scheduled in the same step, and the misfire and overlap
-- policies are applied here, atomically. Firings that arrive together are claimed in one
-- call (fewer round trips). The firing's sentinel key is left alone: its instant has come,
-- so it has expired (Redis deletes it).
-- A compact task (insert.lua: one field of a bucket hash, no job hash) stays so: its claim
-- removes its due entry and adds its lease, nothing else (see task_lib.lua). One whose
-- firing is skipped (misfire) is expanded here into its job hash and jobs-index entry.
-- KEYS[1] due zset   KEYS[2] running zset   KEYS[3] jobs index   KEYS[4] compact task counter
-- then per firing: its job hash, then the sentinel key of the job's next firing if its
--   options say so, then its compact bucket if its options say so, then its ledger (skip
--   records) if its options say so (keys a firing does not
--   need are not sent: each argument costs Redis about as much as a short command's work)
-- ARGV[1] node id   ARGV[2] lease ms   ARGV[3] change channel   ARGV[4] sentinel horizon ms
-- ARGV[5] timer horizon ms: next firings due within it are announced on the change channel,
--   one message {op = 'next', id = '', firings = {{id, ms}, ...}} per call, so that their
--   owners arm timers instead of waiting for the sentinel's `expired` event, which Redis
--   emits late when many keys expire at once (every-second cron jobs). Prefixed "q" (quiet):
--   the caller owns every next firing of the call and arms the timers of those it sent
--   without their sentinel key itself: they are not announced
-- ARGV[6] claim lead ms: how long before its release a firing may be claimed (0: not before)
-- then per firing i (base a = 6 + 5 * (i - 1)):
--   ARGV[a+1] job id   ARGV[a+2] instant ms   ARGV[a+3] "<generation>.<version>" of the job the
--   caller computed with (a job created again after a delete has a new generation)
--   ARGV[a+4] next firing ms or ""
--   ARGV[a+5] options: the misfire tolerance ms alone for the common case (the caller did not
--     apply the misfire policy, run it, nothing missed, overlap allow, not compact, no
--     sentinel key sent), "t<tolerance>" for a compact task in that case, else
--     "s<tolerance>|<flags>|<missed>": flags one character each,
--     applied (the caller applied the misfire policy: take next, run and missed as given),
--     run ("0": skip it, misfire), compact (the caller read the job compact: its bucket is
--     read instead of its hash; gone from there, the reply is 3 with version 0 and the
--     caller reads it again), sentinel (its sentinel key is sent), then the overlap policy
--     (a: allow, f: forbid, r: replace), then ledger ("1": the job's ledger key is sent, after
--     its bucket, and the options go on "|<limit>|<max age ms>|<reason>|<first>|<last>": the
--     ledger's bounds (see ledger_lib.lua) and the range of instants the caller's misfire
--     plan drops, reason "" for none); missed: firings to count as missed
--   Then, for a job with `max_runs`, "#<max runs>" ends the options (always the "s" form, with
--   the ledger key sent): the attempts hash is sent after the ledger key, and the firing runs
--   only while its job's successful firings (`succeeded`) and the firings it has open (`open`:
--   the instants of the firings it ran that have not ended, which complete.lua removes) are
--   fewer than that: otherwise it is skipped (`max_runs` in the ledger), and a job that
--   reached it is finished (`stopped` max_runs, a `finish` message). An open firing with no
--   lease and no queued attempt left (cancelled, dropped) no longer counts.
--   Any of these forms may be prefixed "j<offset>|": a jittered firing, released at its
--     instant plus the offset: it is early until then, and late past the tolerance from then
--     (its instant stays its id, its CAS value and its ledger instant)
--   Each instant that does not run gets its skip record in the ledger here: the late ones the
--   misfire policy drops (misfire, merged, catch_up_limit; paused when the range began while
--   the job was paused, before its resume), one refused by overlap forbid (overlap).
--   A next firing that is due past the timer horizon but within the sentinel horizon gets
--   its sentinel key when the caller sent it, else it is announced like a nearer one.
-- The writes every firing of a call makes to the same key (its due entry removed or moved,
-- its lease added) go as one command per key for the whole call, and compact tasks' due
-- entries are read in one ZMSCORE: a firing costs its job's HMGET and HSET (or its record's
-- HGET), and its share of the rest.
-- A job met twice in one call (a catch-up) sees the earlier firing's writes: they are sent,
-- and its entry read again, before it goes on.
-- Reply: one text for the whole call, its words separated by spaces (a node reads one value
-- per call rather than two per firing: parsing them cost it more than the rest of a claim),
-- per firing its code, followed by a number for codes 1 to 4:
--   1 now: claimed (now may be up to the lead before the release: the node holds the run
--   until then) | 0: claimed already, changed or deleted (stale) | 2 ms: early by ms (past
--   the lead)
--   3 version: job changed, recompute | 4 now: later than the tolerance, apply the misfire policy
--   5: a run of this firing holds a live lease (locked) | 6: skipped (missed: misfire policy)
--   7: skipped, the previous run still runs (overlap forbid)
--   (a firing skipped under max_runs answers 6)
local n = (#ARGV - 6) / 5
assert(n >= 1 and n == math.floor(n) and #KEYS >= 4 + n, 'claim: wrong arity')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local node, lease, channel, horizon = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local quiet = string.byte(ARGV[5], 1) == 113
local announce = tonumber(quiet and string.sub(ARGV[5], 2) or ARGV[5])
-- Claims are judged early against `ahead`: Redis's now plus the claim lead.
local ahead = now + tonumber(ARGV[6])
-- Numbers written per firing are formatted once per call ('%d': Lua's own number format
-- is a float's, and costs more than the rest of a firing's Lua).
local now_s, expiry_s = string.format('%d', now), string.format('%d', now + lease)
-- A run's lease member is "<firing id>|1|<claimed ms>|<node>": its tail is the same for the call.
local tail = '|1|' .. now_s .. '|' .. node
-- A claimed firing's reply words (its `now` is the call's): written once per call.
local claimed_word = '1 ' .. now_s
local reply, soon = {}, {}

-- Writes held back to go as one command per key: due entries to remove, due entries to
-- move (score, member pairs), leases to add (expiry, member pairs), jobs-index entries of
-- expanded compact tasks (0, id pairs).
local due_rem, due_add, run_add, index_add = {}, {}, {}, {}
local expanded = 0
local function flush()
  if #due_rem > 0 then redis.call('ZREM', KEYS[1], unpack(due_rem)) end
  if #due_add > 0 then redis.call('ZADD', KEYS[1], unpack(due_add)) end
  if #run_add > 0 then redis.call('ZADD', KEYS[2], unpack(run_add)) end
  if #index_add > 0 then redis.call('ZADD', KEYS[3], unpack(index_add)) end
  due_rem, due_add, run_add, index_add = {}, {}, {}, {}
end

-- Every firing's due entry, read at once when the call has a compact task (a job hash holds
-- its own next firing, so a call of jobs alone reads none; a job met again is read again,
-- after a flush). Options starting 't', or 's' with the compact flag, name a compact task.
local scores
do
  local ids, compact = {}, false
  for i = 1, n do
    local a = 6 + 5 * (i - 1)
    ids[i] = ARGV[a + 1]
    if not compact then
      local first = string.byte(ARGV[a + 5], 1)
      compact = first == 116 or (first == 115 and string.match(ARGV[a + 5], '^s%d+|..(.)') == '1')
    end
  end
  if compact then scores = redis.call('ZMSCORE', KEYS[1], unpack(ids)) end
end
-- Numbers met in a call (instants, tolerances) are mostly the same few strings: `num[s]`
-- converts each once (a conversion is a strtod; `+ 0` rather than tonumber, which converts
-- twice), a plain table read after that.
local num = setmetatable({}, {__index = function(t, s)
  local v = s + 0
  t[s] = v
  return v
end})
local met = {}

-- Record a claimed (or skipped) firing on its job: move its due entry on to the next
-- firing (or remove it), write the fields of the run (`active`, `runs`; nil when none ran)
-- with the rest of the job's fields in one HSET, expand a compact task (`record`: the
-- fields of its job hash) into its job hash and index entry. A function of its own, not a
-- closure per firing (a closure costs an allocation per captured local). Outside an
-- expansion the HSET is written out for each set of fields rather than built as a table
-- and unpacked: a table per firing costs an allocation and its unpack a copy.
local function advance(job, next_sentinel, bucket, id, at_s, nxt, missed, record, active, runs)
  if record then
    local f
    if nxt == '' then
      f = {'next', nxt, 'last', at_s, 'status', 'finished'}
    else
      f = {'next', nxt, 'last', at_s, 'status', 'active'}
    end
    if active then
      f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'active', active, 'runs', runs
    end
    for j = 1, #record do f[#f + 1] = record[j] end
    redis.call('HSET', job, unpack(f))
    redis.call('HDEL', bucket, id)
    index_add[#index_add + 1] = '0'
    index_add[#index_add + 1] = id
    expanded = expanded + 1
  elseif nxt == '' then
    if active then
      redis.call('HSET', job, 'next', nxt, 'last', at_s, 'status', 'finished', 'active', active, 'runs', runs)
    else
      redis.call('HSET', job, 'next', nxt, 'last', at_s, 'status', 'finished')
    end
  elseif active then
    redis.call('HSET', job, 'next', nxt, 'last', at_s, 'active', active, 'runs', runs)
  else
    redis.call('HSET', job, 'next', nxt, 'last', at_s)
  end
  if nxt == '' then
    due_rem[#due_rem + 1] = id
  else
    due_add[#due_add + 1] = nxt
    due_add[#due_add + 1] = id
    -- A next firing within the timer horizon is announced: its owner arms a timer and
    -- claims at the instant, and the sweeper's read-ahead arms it again after a lost
    -- message (a reconnect) or a change of owners. Its sentinel key would only expire after
    -- that claim, a deletion and an `expired` event to every node for nothing, so it gets
    -- none. One further out gets its sentinel key now if it is within the sentinel horizon,
    -- or from promote.lua as it comes within it. The announcement is written here as JSON
    -- (job ids and instants need no escaping): cheaper than a table per firing for cjson.
    -- Quiet, the caller arms those sent without their sentinel key: they are not announced.
    local next_ms = num[nxt]
    if next_ms <= now + horizon and (next_ms <= now + announce or not next_sentinel) then
      if next_sentinel or not quiet then soon[#soon + 1] = '["' .. id .. '","' .. nxt .. '"]' end
    elseif next_ms <= now + horizon then
      redis.call('SET', next_sentinel, '1', 'PXAT', nxt)
    end
  end
  if missed ~= '0' then redis.call('HINCRBY', job, 'missed', missed) end
end

-- The ledger's record of a range the misfire policy dropped: `paused` when it began while the
-- job was paused (a resume schedules the first firing after the pause began, so the firings
-- the pause skipped come here as late ones).
local function ledger_range(job, ledger, lopts, reason, first, last, missed)
  if not ledger or reason == '' or missed == '0' then return end
  local p = redis.call('HMGET', job, 'paused_at', 'resumed_at')
  if p[1] and p[2] and num[first] >= num[p[1]] and num[first] <= num[p[2]] then reason = 'paused' end
  ledger_skip(ledger, reason, first, last, missed, '', now_s, lopts)
end

-- Whether a firing of a job with `max_runs` may run: 'run' (its instant is added to the job's
-- open firings), 'skip' (runs in progress could make up the rest) or 'end' (it reached it).
local function admit(job, attempts, id, at_s, max)
  local f = redis.call('HMGET', job, 'succeeded', 'open')
  local done, open = tonumber(f[1] or '0') or 0, f[2] or ''
  if done >= max then return 'end' end
  local n = 0
  for _ in string.gmatch(open, '%d+') do n = n + 1 end
  if done + n >= max then
    -- Keep only the firings still in progress: a lease in the running ZSET or a queued attempt.
    local live = {}
    local cursor = '0'
    repeat
      local page = redis.call('ZSCAN', KEYS[2], cursor, 'MATCH', id .. ':*', 'COUNT', 1000)
      cursor = page[1]
      for j = 1, #page[2], 2 do
        local ms = string.match(page[2][j], '^[^|:]*:(%d+)|')
        if ms then live[ms] = true end
      end
    until cursor == '0'
    local kept = {}
    for ms in string.gmatch(open, '%d+') do
      if live[ms] or redis.call('HEXISTS', attempts, id .. ':' .. ms) == 1 then kept[#kept + 1] = ms end
    end
    open, n = table.concat(kept, ' '), #kept
    if done + n >= max then
      redis.call('HSET', job, 'open', open)
      return 'skip'
    end
  end
  redis.call('HSET', job, 'open', open == '' and at_s or open .. ' ' .. at_s)
  return 'run'
end

local function claim(i, job, next_sentinel, bucket, id, at_s, version, nxt, tolerance, applied,
                     run, missed, overlap, compact, ledger, lopts, reason, first, last, max,
                     attempts, jitter)
  -- An instant in ms is an integer below 2^53: Redis writes its score as those digits, so
  -- the texts compare (the caller writes the instant the same way).
  local again = met[id]
  if again then flush() end
  met[id] = true
  local at = num[at_s]
  -- When it is released: its instant, or later by its jitter offset.
  local due = at + jitter
  local fields
  -- A compact task's record: the fields its job hash gets when it is expanded.
  local record = nil
  if compact == '1' then
    local score
    if again then
      score = redis.call('ZSCORE', KEYS[1], id)
    else
      score = scores[i]
    end
    if score ~= at_s then return 0, 'stale' end
    if due > ahead then return 2, due - ahead end
    local rec = redis.call('HGET', bucket, id)
    if not rec then return 3, '0' end
    local g = string.match(rec, '^(%d+)|')
    if g .. '.1' ~= version then return 3, '1' end
    if applied ~= '1' and due < now - tolerance then return 4, now end
    if run == '1' and nxt == '' then
      -- A compact task stays compact while its firing runs, and after (see task_lib.lua):
      -- its due entry's removal and its run's lease are all its claim writes.
      local member = id .. ':' .. at_s .. tail
      due_rem[#due_rem + 1] = id
      run_add[#run_add + 1] = expiry_s
      run_add[#run_add + 1] = member
      return 1, now
    end
    -- Skipped (misfire): expanded, to record the missed firing.
    local c, s = string.match(rec, '^%d+|(%d+)|(.*)$')
    fields = {'1', false, g, '0'}
    record = {'created', c, 'gen', g, 'spec', '{"id":"' .. id .. '",' .. string.sub(s, 2),
      'version', '1', 'updated', c, 'once', '1'}
  else
    -- A job hash's `next` is its due entry's score, as the same digits: every script that
    -- moves or removes the entry writes it in the same step.
    fields = redis.call('HMGET', job, 'version', 'active', 'gen', 'runs', 'next')
    if fields[5] ~= at_s then return 0, 'stale' end
    if due > ahead then return 2, due - ahead end
  end
  if (fields[3] or '0') .. '.' .. (fields[1] or '0') ~= version then return 3, fields[1] or '0' end
  if applied ~= '1' and due < now - tolerance then return 4, now end

  local fid = id .. ':' .. at_s
  if run == '0' then
    advance(job, next_sentinel, bucket, id, at_s, nxt, missed, record)
    ledger_range(job, ledger, lopts, reason, first, last, missed)
    return 6, 'missed'
  end
  -- The latest run's lease: is it still held? Looked up only when the answer matters (a
  -- policy other than allow, or a run of this very firing: then it is this run's lock).
  -- Its member starts with its firing id and '|'.
  local active = fields[2]
  local replaced = nil
  if active and active ~= '' then
    local this = string.byte(active, #fid + 1) == 124 and string.find(active, fid, 1, true) == 1
    if this or overlap ~= 'allow' then
      local held = redis.call('ZSCORE', KEYS[2], active)
      if held and tonumber(held) > now then
        if this then return 5, 'locked' end
        local running = string.match(active, '^[^|]*')
        if overlap == 'forbid' then
          advance(job, next_sentinel, bucket, id, at_s, nxt, missed, record)
          redis.call('HINCRBY', job, 'skipped', 1)
          ledger_range(job, ledger, lopts, reason, first, last, missed)
          if ledger then ledger_skip(ledger, 'overlap', at_s, at_s, '1', running, now_s, lopts) end
          return 7, running
        elseif overlap == 'replace' then
          replaced = running
        end
      end
    end
  end
  if max then
    local verdict = admit(job, attempts, id, at_s, max)
    if verdict ~= 'run' then
      if verdict == 'end' then nxt = '' end
      advance(job, next_sentinel, bucket, id, at_s, nxt, missed, record)
      redis.call('HINCRBY', job, 'skipped', 1)
      ledger_range(job, ledger, lopts, reason, first, last, missed)
      ledger_skip(ledger, 'max_runs', at_s, at_s, '1', '', now_s, lopts)
      if verdict == 'end' then
        redis.call('HSET', job, 'stopped', 'max_runs')
        redis.call('SPUBLISH', channel, cjson.encode({op = 'finish', id = id, reason = 'max_runs'}))
      end
      return 6, 'missed'
    end
  end
  local member = fid .. tail
  advance(job, next_sentinel, bucket, id, at_s, nxt, missed, record, member,
    string.format('%d', (fields[4] or 0) + 1))
  run_add[#run_add + 1] = expiry_s
  run_add[#run_add + 1] = member
  ledger_range(job, ledger, lopts, reason, first, last, missed)
  if replaced then
    redis.call('SPUBLISH', channel, cjson.encode({op = 'cancel', id = id, firing = replaced}))
  end
  return 1, now
end

local k = 4
for i = 1, n do
  local a = 6 + 5 * (i - 1)
  local opts = ARGV[a + 5]
  local first = string.byte(opts, 1)
  local jitter = 0
  if first == 106 then
    local j, rest = string.match(opts, '^j(%d+)|(.*)$')
    assert(j, 'claim: bad jitter option')
    jitter, opts = j + 0, rest
    first = string.byte(opts, 1)
  end
  local applied, run, compact, sentinel, overlap, missed = '0', '1', '0', false, 'allow', '0'
  local tolerance, ledger, lopts, reason, from, to = nil, false, nil, '', nil, nil
  local max, attempts = nil, nil
  if first == 115 then
    -- A plain find: no pattern search for the options of a job without max_runs.
    local hash = string.find(opts, '#', 1, true)
    if hash then opts, max = string.sub(opts, 1, hash - 1), tonumber(string.sub(opts, hash + 1)) end
  end
  if first < 97 then
    tolerance = num[opts]
  elseif first == 116 then
    -- "t<tolerance>": a compact task, otherwise the common case.
    tolerance, compact = string.sub(opts, 2) + 0, '1'
  else
    local t, flags, m, rest = string.match(opts, '^s(%d+)|(%w+)|(%d+)(.*)$')
    assert(t, 'claim: bad options')
    if string.sub(flags, 6, 6) == '1' then
      local l, g, r, f, z = string.match(rest, '^|(%d+)|(%d+)|([%a_]*)|(%d*)|(%d*)$')
      assert(l, 'claim: bad ledger options')
      ledger, lopts, reason, from, to = true, l .. '|' .. g, r, f, z
    end
    tolerance, missed = tonumber(t), m
    applied, run, compact = string.sub(flags, 1, 1), string.sub(flags, 2, 2), string.sub(flags, 3, 3)
    sentinel = string.sub(flags, 4, 4) == '1'
    local o = string.sub(flags, 5, 5)
    overlap = o == 'f' and 'forbid' or (o == 'r' and 'replace' or 'allow')
  end
  local job, next_sentinel, bucket = KEYS[k + 1], nil, nil
  k = k + 1
  if sentinel then
    next_sentinel = KEYS[k + 1]
    k = k + 1
  end
  if compact == '1' then
    bucket = KEYS[k + 1]
    k = k + 1
  end
  if ledger then
    ledger = KEYS[k + 1]
    k = k + 1
  end
  if max then
    assert(ledger, 'claim: max runs without the ledger')
    attempts = KEYS[k + 1]
    k = k + 1
  end
  local code, arg = claim(i, job, next_sentinel, bucket,
    ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], tolerance, applied, run,
    missed, overlap, compact, ledger, lopts, reason, from, to, max, attempts, jitter)
  if code == 1 then
    reply[#reply + 1] = claimed_word
  elseif code == 2 or code == 3 then
    reply[#reply + 1] = code .. ' ' .. string.format('%d', arg)
  elseif code == 4 then
    reply[#reply + 1] = '4 ' .. now_s
  else
    reply[#reply + 1] = code
  end
end
assert(k == #KEYS, 'claim: wrong number of keys')
flush()
if expanded > 0 then redis.call('DECRBY', KEYS[4], expanded) end
if #soon > 0 then
  redis.call('SPUBLISH', channel, '{"op":"next","id":"","firings":[' .. table.concat(soon, ',') .. ']}')
end
return table.concat(reply, ' ')
