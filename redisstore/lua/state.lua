-- state: a read-only snapshot of the host. A lapsed open period reads as
-- half-open (the next admit or record makes it so).
--
-- Returns {haltedSince, breaker, failures, openUntil, rate, ceiling,
-- pausedUntil, n0..n5, recentSince, epoch}; rate and ceiling are strings,
-- zero times mean none.

local since = 0
if halted then since = halted end
local bs, bf, bo = CLOSED, 0, 0
if b then
  bs, bf, bo = b.s, b.fl, b.o
  if bs == OPENED and bo < now then bs, bf = HALFOPEN, 0 end
  if bs ~= OPENED then bo = 0 end
end
local r, x, p, w, e = CONF, 0, 0, 0, 0
local n = {0, 0, 0, 0, 0, 0}
if l then
  r, x, e = l.r, l.x, l.e
  if now < l.p then p = l.p end
  if now - l.w < WINDOW then n, w = l, l.w end
end
return {since, bs, bf, bo, string.format('%.17g', r), string.format('%.17g', x), p, n[1], n[2], n[3], n[4], n[5], n[6], w, e}
