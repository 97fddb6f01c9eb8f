-- ceiling: cap the host's rate (robots.txt Crawl-delay). A faster current
-- rate drops to the cap at once; recovery stops at it.
--
-- ARGV[15] the cap per minute (0: remove it)

local C = tonumber(ARGV[15])
if l == nil then l = newLimiter() end
l.u = now
if C <= 0 then
  l.x = 0
  -- A rate below the configured one recovers toward it, as after a
  -- throttle.
  if l.r < l.c then l.g, l.bs, l.k = l.c, l.r, 0 end
else
  l.x = C
  if l.r > l.x then setRate(l.x) end
end
save()
return 0
