-- halt: write back a halt this State knows (made locally during an outage,
-- or seen in Redis before it may have lost its data). It stands alone,
-- without the prelude, so that nothing but a key of another type stops
-- it: a corrupt state does not lose the halt.
--
-- KEYS[1] the host's state key, KEYS[2] its halt key, KEYS[3] its resume
-- key (when the host was last resumed, microseconds).
-- ARGV[1] when the halt began (microseconds).
-- Returns 1 when this call halted the host, 0 when it was halted already,
-- -1 when it was resumed at or after the halt began (the halt is not
-- written: an operator's Resume stands).

local v = redis.pcall('GET', KEYS[2])
if type(v) == 'table' and v.err then
  return redis.error_reply('EGRESSKIT_CORRUPT halt wrongtype')
end
if v then return 0 end
local r = redis.pcall('GET', KEYS[3])
if type(r) == 'table' and r.err then
  return redis.error_reply('EGRESSKIT_CORRUPT resumed wrongtype')
end
r = tonumber(r or '')
if r and r >= tonumber(ARGV[1]) then return -1 end
redis.call('SET', KEYS[2], ARGV[1])
-- A halted host keeps its breaker, as in memory.
redis.call('PERSIST', KEYS[1])
return 1
