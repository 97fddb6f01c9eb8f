-- deferred: the OK outcomes a worker held back (Config.RecordDelay) and
-- sends with its next script for the host. Each is applied as record
-- applies it (the Go side puts record's application of an outcome where
-- $RECORD stands, $AT and $THEN in their places), at the time it was
-- made: now moved back by its age. The state is saved once, by the
-- operation that carries them ($THEN: what the operation does once they
-- are applied). The application is the body of a loop, not a function:
-- a script runs whole on every call, and Lua would make a function, and
-- each variable it captures, on every call.
--
-- ARGV[at]        the number n of records
-- ARGV[at+1+4i]   the i-th record's age, microseconds before now
-- ARGV[at+2+4i]   its admission's generation
-- ARGV[at+3+4i]   the quota its answer stated, per minute (0: none)
-- ARGV[at+4+4i]   its time to headers, microseconds (0: unknown)
if (tonumber(ARGV[$AT]) or 0) > 0 then
  local t0 = now
  for i = 0, tonumber(ARGV[$AT]) - 1 do
    local j = $AT + 1 + 4 * i
    local age = tonumber(ARGV[j]) or 0
    if age < 0 then age = 0 end
    now = t0 - age
    local OUTCOME, RETRYAFTER, GEN, QUOTA = OK, 0, tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]) or 0
    local LATENCY = tonumber(ARGV[j + 3]) or 0
    -- $RECORD
  end
  now = t0
  $THEN
end
