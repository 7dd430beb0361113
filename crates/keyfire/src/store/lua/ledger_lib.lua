-- Shared by the scripts that drop a due instant (claim.lua, claim_retry.lua, upsert.lua,
-- delete.lua); prepended to them when they are loaded.
-- The ledger of what did not run: a job's list `{tag}:skips:<id>`, newest first, of records
--   {"reason":"…","first_ms":…,"last_ms":…,"count":…,"at_ms":…[,"detail":"…"]}
-- one per instant or range of instants dropped (a long outage's thousands of late instants are
-- one record with their count). Bounded as the run history: trimmed to `limit` records, and the
-- list expires `max_age` ms after its latest record (readers hide records older than that).
-- An `overlap` skip refused by the same run as the newest record extends that record instead
-- of adding one: a long run of an every-second job is one record, not one per second.
-- Cost: LPUSH, LTRIM and PEXPIRE (an extension: LINDEX, LSET and PEXPIRE); about 100 bytes.
-- ledger_skip(key, reason, first, last, count, detail, now, opts): first, last, count and now
-- as strings of digits, detail "" for none, opts "<limit>|<max age ms>".
local function ledger_skip(key, reason, first, last, count, detail, now, opts)
  local limit, age = string.match(opts, '^(%d+)|(%d+)$')
  local tail = ',"at_ms":' .. now
  if detail ~= '' then tail = tail .. ',"detail":"' .. detail .. '"' end
  if reason == 'overlap' then
    local head = redis.call('LINDEX', key, 0)
    if head then
      local r, f, c, d = string.match(head,
        '^{"reason":"([%a_]+)","first_ms":(%d+),"last_ms":%d+,"count":(%d+),"at_ms":%d+(.*)}$')
      if r == reason and d == string.sub(tail, #(',"at_ms":' .. now) + 1) then
        redis.call('LSET', key, 0, '{"reason":"' .. reason .. '","first_ms":' .. f .. ',"last_ms":' .. last
          .. ',"count":' .. string.format('%d', c + count) .. tail .. '}')
        redis.call('PEXPIRE', key, age)
        return
      end
    end
  end
  redis.call('LPUSH', key, '{"reason":"' .. reason .. '","first_ms":' .. first .. ',"last_ms":' .. last
    .. ',"count":' .. count .. tail .. '}')
  redis.call('LTRIM', key, 0, limit - 1)
  redis.call('PEXPIRE', key, age)
end
