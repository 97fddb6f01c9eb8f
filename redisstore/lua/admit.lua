-- admit: may one attempt be sent to the host now, and take a token.
-- In order: the halt, the breaker (noticing a lapsed open period, counting
-- half-open probes), then a pacing token; an open or halted host spends no
-- token, and a wait past the caller's deadline takes nothing.
--
-- ARGV[15] the caller's remaining time budget (negative: no deadline)
-- ARGV[16] the most tokens to lease beyond this attempt's (0: none)
-- ARGV[17] the lease's window, in microseconds
--
-- Returns {0, wait, probe, generation, epoch, rate, leased, base} when
-- admitted (the rate in thousandths of a request a minute; leased the
-- tokens taken beyond this attempt's, for the caller's next attempts within
-- the window; base the host's base latency in microseconds), {1, since} when halted, {2, until} when open (until 0:
-- half-open, every probe slot taken), {3, wait} when the wait would pass
-- the deadline.

local BUDGET = tonumber(ARGV[15])
local LEASEMAX = tonumber(ARGV[16]) or 0
local LEASEWIN = tonumber(ARGV[17]) or 0

if halted then
  return {1, halted}
end

if b == nil then b = newBreaker() end
b.u = now
lapse()
if b.s == OPENED then
  save()
  return {2, b.o}
end
if b.s == HALFOPEN and b.q - b.x >= PROBES then
  if b.p > 0 and now - b.p >= LEASE then
    -- The probes in flight were admitted a lease ago and never recorded
    -- (a worker died): start a new half-open generation.
    setState(HALFOPEN)
  else
    save()
    return {2, 0}
  end
end

if l == nil then l = newLimiter() end
l.u = now
local at = now
if l.p > at then at = l.p end
at = clock(at)
local tok = tokensAt(at)
if BUDGET >= 0 then
  local wait = at - now
  if tok < 1 then wait = wait + delay(1 - tok) end
  if wait > BUDGET then
    save()
    return {3, floor(math.min(wait, MAXWAIT))}
  end
end

tok = tok - 1
l.t, l.tf, l.a = tok, 1, at
local act = at
if tok < 0 then act = at + delay(-tok) end
-- Whether the pace binds: how often an admission outside a pause waits
-- for its token half an interval or more (attempts queue at the pace,
-- each waiting about an interval; a demand of half the pace has every
-- other admission wait a little).
if l.p <= now then
  local w = 0
  if act - now >= delay(0.5) then w = 1 end
  l.bd, l.lw = l.bd + (w - l.bd) * BOUNDW, w
end

local probe = 0
b.q = b.q + 1
if b.s == HALFOPEN then
  probe = 1
  b.p = now
end
-- A lease: tokens on hand now beyond this attempt's, for a closed host
-- whose last outcome was not a failure, that is not paused and whose rate
-- gives at least 2 in the window.
local leased = 0
if LEASEMAX > 0 and b.s == CLOSED and b.fl == 0 and at == now and tok >= 1 then
  local inWindow = math.floor(LEASEWIN * l.r / 60000000)
  if inWindow >= 2 then
    leased = math.min(LEASEMAX, math.floor(tok), inWindow)
    tok = tok - leased
    l.t = tok
  end
end
save()
-- The rate goes in thousandths of a request a minute (an integer reply),
-- the base latency in microseconds.
return {0, floor(math.min(act - now, MAXWAIT)), probe, b.g, l.e, floor(l.r * 1000 + 0.5), leased, floor(l.qb + 0.5)}
