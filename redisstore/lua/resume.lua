-- resume: lift the host's halt; the breaker keeps its state. It stands
-- alone, without the prelude, so that a corrupt state cannot keep an
-- operator from lifting a halt: only a halt key of another type stops it.
--
-- KEYS[1] and KEYS[2] as for the prelude (common.lua), KEYS[3] the
-- host's resume key, KEYS[4] the state hash of versions before the packed
-- state (deleted: a halted host's had no TTL); it reads ARGV[1] (now), ARGV[5] and ARGV[14] (the
-- idle TTLs).
-- Returns 1 when the host was halted.
--
-- The resume key keeps when the host was resumed (no TTL), whether or not
-- it was halted here: a worker that still remembers an older halt (Redis
-- may have lost it) then knows not to write it back.

local S, H = KEYS[1], KEYS[2]
local v = redis.pcall('GET', H)
if type(v) == 'table' and v.err then
  return redis.error_reply('EGRESSKIT_CORRUPT halt wrongtype')
end
-- now: see clock.lua, prepended to this script.
redis.call('SET', KEYS[3], string.format('%d', now))
redis.call('DEL', KEYS[4])
if not v then return 0 end
redis.call('DEL', H)

-- The state was kept while the host was halted: mark the breaker used
-- now, as memory does, and let the state expire again once the host is
-- idle (the scripts forget idle parts by the exact rules; this expiry is
-- only never earlier than those). A value the prelude would refuse is left
-- alone: the prelude reports it.
local raw = redis.pcall('GET', S)
if type(raw) ~= 'string' or #raw < 338 or string.byte(raw, 1) ~= 1 then return 1 end
-- The version byte, the flags, then the breaker's 9 doubles (bo the 7th,
-- bu the 8th) and the limiter's (lp the first): see common.lua.
local fl = string.byte(raw, 2)
local bo, lp = nil, nil
if fl % 2 == 1 then
  bo = struct.unpack('<d', raw, 51)
  raw = string.sub(raw, 1, 58) .. struct.pack('<d', now) .. string.sub(raw, 67)
end
if fl == 2 or fl == 3 then lp = struct.unpack('<d', raw, 75) end
local bidle, lidle = tonumber(ARGV[5]), tonumber(ARGV[14])
if bidle < 0 or lidle < 0 then
  redis.call('SET', S, raw, 'KEEPTTL')
  return 1
end
local ttl = math.max(bidle, lidle)
for _, t in ipairs({bo or 0, lp or 0}) do
  if t == t and t - now > ttl and t < 1e18 then ttl = t - now end
end
redis.call('SET', S, raw, 'PX', math.max(1, math.ceil(ttl / 1000)))
return 1
