-- halt: write back a halt known while Redis was unreachable. It stands
-- alone, without the prelude, so that nothing but a halt key of another
-- type stops it: a corrupt state hash does not lose the halt.
--
-- KEYS[1] the host's state hash, KEYS[2] its halt key.
-- ARGV[1] when the halt began (microseconds).
-- ARGV[2] "local": a halt made during the outage, written unless the host
--         is halted already; "lost": a halt seen in Redis before the
--         outage, written only when Redis holds no key of the host at all
--         (it lost its data), so that a Resume made meanwhile stands.
-- Returns 1 when this call halted the host.

local v = redis.pcall('GET', KEYS[2])
if type(v) == 'table' and v.err then
  return redis.error_reply('EGRESSKIT_CORRUPT halt wrongtype')
end
if v then return 0 end
if ARGV[2] ~= 'local' and redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
-- A halted host keeps its breaker, as in memory.
redis.call('PERSIST', KEYS[1])
return 1
