-- record: feed the outcome of one admitted attempt back. The breaker
-- counts it when the admission's generation is current (OK resets the
-- failure count and closes a half-open circuit after HalfOpenProbes
-- successes; Transient, Throttled and Refused count as failures and open
-- the circuit at FailureThreshold, or at once when half-open; anything
-- else is neutral and frees a probe slot); Refused halts the host; the
-- limiter adapts (Throttled halves and pauses, runs of OK recover).
--
-- ARGV[15] the outcome (classify.Outcome)
-- ARGV[16] Retry-After
-- ARGV[17] the admission's generation
--
-- The halt itself is set by the prelude, before the state hash is read.
--
-- Returns {from, to, halted, since}: the breaker states before and after,
-- 1 when this call halted the host, and when the halt began (0: none).

local OUTCOME = tonumber(ARGV[15])
local RETRYAFTER = tonumber(ARGV[16])
local GEN = tonumber(ARGV[17])

local from, to = CLOSED, CLOSED
if b == nil and OUTCOME == REFUSED then b = newBreaker() end
if b ~= nil then
  b.u = now
  lapse()
  from = b.s
  if GEN == b.g then
    if OUTCOME == OK then
      b.k, b.fl = b.k + 1, 0
      if b.s == HALFOPEN and b.k >= PROBES then setState(CLOSED) end
    elseif OUTCOME == TRANSIENT or OUTCOME == THROTTLED or OUTCOME == REFUSED then
      if b.s == CLOSED then
        b.fl, b.k = b.fl + 1, 0
        if b.fl >= THRESHOLD then setState(OPENED) end
      elseif b.s == HALFOPEN then
        setState(OPENED)
      end
    else
      b.x = b.x + 1
    end
  end
  to = b.s
end

if l == nil then l = newLimiter() end
l.u = now
if now - l.w >= WINDOW then
  l.n, l.w = {0, 0, 0, 0, 0, 0}, now
end
if OUTCOME <= 5 and l.n[OUTCOME + 1] < 4294967295 then
  l.n[OUTCOME + 1] = l.n[OUTCOME + 1] + 1
end
if OUTCOME == OK then
  l.k = l.k + 1
  if l.k >= RAFTER then
    l.k = 0
    local tp = top()
    if l.r < tp then
      local step = RSTEP
      if step == 0 then step = l.c / 10 end
      setRate(math.min(l.r + step, tp))
    end
  end
elseif OUTCOME == THROTTLED then
  l.k = 0
  local pause = RETRYAFTER
  if pause < 0 then pause = 0 end
  if now >= l.p then
    -- A new episode halves the rate; more Throttled answers to the same
    -- episode only extend the pause.
    setRate(math.min(math.max(l.r / 2, math.min(FLOOR, l.c)), top()))
  end
  if pause == 0 then pause = math.min(60000000 / l.r, MAXPAUSE) end
  local untilT = now + math.floor(math.min(pause, MAXPAUSE))
  if untilT > l.p then l.p = untilT end
elseif OUTCOME == TRANSIENT or OUTCOME == REFUSED then
  l.k = 0
end

save()
return {from, to, newhalt, halted or 0}
