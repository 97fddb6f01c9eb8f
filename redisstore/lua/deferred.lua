-- deferred: the OK outcomes a worker held back (Config.RecordDelay) and
-- sends with its next script for the host. Each is applied as record
-- applies it (applyRecord, the record script wrapped in a function of its
-- own ARGV, is prepended by the Go side), at the time it was made: now
-- moved back by its age. The state is saved once, by the operation that
-- carries them (or by save() after applyDeferred when it saves nothing).
--
-- ARGV[at]        the number n of records
-- ARGV[at+1+3i]   the i-th record's age, microseconds before now
-- ARGV[at+2+3i]   its admission's generation
-- ARGV[at+3+3i]   the quota its answer stated, per minute (0: none)
--
-- Returns n.
local function applyDeferred(at)
  local n = tonumber(ARGV[at]) or 0
  if n <= 0 then return 0 end
  local t0, keep = now, save
  save = function() end
  local a = {}
  for i = 0, n - 1 do
    local j = at + 1 + 3 * i
    local age = tonumber(ARGV[j]) or 0
    if age < 0 then age = 0 end
    a[15], a[16], a[17], a[18] = OK, 0, ARGV[j + 1], ARGV[j + 2]
    now = t0 - age
    applyRecord(a)
  end
  now, save = t0, keep
  return n
end
