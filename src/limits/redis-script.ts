import { createHash } from 'node:crypto'

/**
 * The GCRA of limits/gcra.ts as one Redis script: every rate limit of a request is decided in one
 * round trip, atomically (a script runs alone, redis.io "Scripting with Lua"), on Redis's own
 * clock (TIME), so replicas with drifting clocks still share one schedule. All checks pass or
 * none is counted. TATs are in ms with microsecond decimals.
 *
 * Each limit is one sorted set, its bucket table: member = the key's digest (limits/key.ts),
 * score = its TAT, at most `capacity` members, the set expiring once its last bucket is idle.
 * SECURITY: as in limits/local.ts RateTable, a bucket whose TAT is ahead of now is never dropped
 * to make room: a new key that finds the set full (once the idle members, scores up to now, are
 * removed) is refused, and nothing of the request is counted.
 *
 * KEYS: one table per check. ARGV: member, interval ms, burst and capacity per check.
 * Reply: {allowed (1|0), then per check: status (0 passed, 1 over its rate, 2 table full),
 * remaining, retry-after ms (ceil), reset ms (ceil)}.
 */
export const GCRA_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local ok = true
local tats = {}
local out = {0}
for i = 1, #KEYS do
  local member = ARGV[4 * i - 3]
  local interval = tonumber(ARGV[4 * i - 2])
  local burst = tonumber(ARGV[4 * i - 1])
  local capacity = tonumber(ARGV[4 * i])
  local tat = tonumber(redis.call('ZSCORE', KEYS[i], member))
  local full = false
  if tat == nil and redis.call('ZCARD', KEYS[i]) >= capacity then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
    full = redis.call('ZCARD', KEYS[i]) >= capacity
  end
  if full then
    ok = false
    local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
    local wait = math.max(1, math.ceil(tonumber(first[2]) - now))
    out[#out + 1] = 2
    out[#out + 1] = 0
    out[#out + 1] = wait
    out[#out + 1] = wait
  else
    if tat == nil or tat < now then tat = now end
    local nxt = tat + interval
    local capacityMs = burst * interval
    local ahead = nxt - now
    if ahead > capacityMs + 1e-6 then
      ok = false
      out[#out + 1] = 1
      out[#out + 1] = 0
      out[#out + 1] = math.ceil(ahead - capacityMs)
      out[#out + 1] = math.ceil(tat - now)
    else
      tats[i] = nxt
      out[#out + 1] = 0
      out[#out + 1] = math.floor((capacityMs - ahead) / interval + 1e-6)
      out[#out + 1] = 0
      out[#out + 1] = math.ceil(ahead)
    end
  end
end
if ok then
  out[1] = 1
  for i = 1, #KEYS do
    redis.call('ZADD', KEYS[i], string.format('%.3f', tats[i]), ARGV[4 * i - 3])
    local ttl = math.ceil(tats[i] - now) + 1
    if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
  end
end
return out
`

export const GCRA_SCRIPT_SHA = createHash('sha1').update(GCRA_SCRIPT).digest('hex')
