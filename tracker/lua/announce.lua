-- One announce, in one round trip: trim expired peers, record the announce,
-- count the swarm, pick the peers to hand out (tracker/handout.py's rules).
-- Every key is one swarm's ({info-hash hex} hash tag: one Cluster slot).
--
-- KEYS[1] seeds     sorted set: compact endpoint -> expiry (ms)
-- KEYS[2] leechers  sorted set: compact endpoint -> expiry (ms)
-- KEYS[3] peers     hash: compact endpoint -> peer id (20 bytes) .. site name;
--                   field "#d": completed count; "#x": until when the swarm index holds it
-- KEYS[4] (optional) the announcer's site: sorted set of its peers in this swarm -> expiry
-- ARGV: now_ms, ttl_ms, member, value, op ("s" seed, "l" leecher, "x" stopped,
--       "n" record nothing), completed ("1"/"0"), numwant, listed ("1"/"0"), max_peers
-- Returns {complete, incomplete, downloaded, index_until or 0, {members...}, {peer ids...}}
local S, L, P, A = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local me, value, op = ARGV[3], ARGV[4], ARGV[5]
local numwant, max_peers = tonumber(ARGV[7]), tonumber(ARGV[9])

local function trim(z)
  local gone = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, 1000)
  if #gone > 0 then
    -- at most 1000 per call (bounded work); the rest go at the next announce
    redis.call('ZREMRANGEBYRANK', z, 0, #gone - 1)
    redis.call('HDEL', P, unpack(gone))
  end
end
trim(S)
trim(L)
if A then redis.call('ZREMRANGEBYSCORE', A, '-inf', now) end

local until_ms = now + ttl
if op == 's' or op == 'l' then
  local into, other = S, L
  if op == 'l' then into, other = L, S end
  local known = redis.call('ZREM', other, me) == 1 or redis.call('ZSCORE', into, me)
  if not known and redis.call('ZCARD', S) + redis.call('ZCARD', L) >= max_peers then
    -- full: the peer that announced longest ago makes room
    local ls, ss = redis.call('ZRANGE', L, 0, 0, 'WITHSCORES'), redis.call('ZRANGE', S, 0, 0, 'WITHSCORES')
    local z, old = L, ls[1]
    if not old or (ss[1] and tonumber(ss[2]) < tonumber(ls[2])) then z, old = S, ss[1] end
    if old then
      redis.call('ZREM', z, old)
      redis.call('HDEL', P, old)
    end
  end
  redis.call('ZADD', into, until_ms, me)
  redis.call('HSET', P, me, value)
  if A then redis.call('ZADD', A, until_ms, me) end
elseif op == 'x' then
  redis.call('ZREM', S, me)
  redis.call('ZREM', L, me)
  redis.call('HDEL', P, me)
  if A then redis.call('ZREM', A, me) end
end
if ARGV[6] == '1' then redis.call('HINCRBY', P, '#d', 1) end

local complete, incomplete = redis.call('ZCARD', S), redis.call('ZCARD', L)
local index_until = 0
if op ~= 'n' and complete + incomplete > 0 then
  redis.call('PEXPIRE', S, ttl)
  redis.call('PEXPIRE', L, ttl)
  redis.call('PEXPIRE', P, ttl)
  if A then redis.call('PEXPIRE', A, ttl) end
  -- The swarm index (outside this slot) is refreshed by the caller once per half ttl.
  local x = tonumber(redis.call('HGET', P, '#x') or '0')
  if x - now < ttl / 2 then
    redis.call('HSET', P, '#x', until_ms)
    index_until = until_ms
  end
end
local downloaded = tonumber(redis.call('HGET', P, '#d') or '0')

-- The handout: the announcer's site first, then seeds, then leechers; each
-- group sampled (ZRANDMEMBER: distinct members, O(count)) and shuffled.
local out, taken, ntaken = {}, {[me] = true}, 0
local function shuffle(t)
  for i = #t, 2, -1 do
    local j = math.random(i)
    t[i], t[j] = t[j], t[i]
  end
end
local function take(z, room)
  if room <= 0 then return end
  local got = redis.call('ZRANDMEMBER', z, room + 1 + ntaken)
  shuffle(got)
  for _, m in ipairs(got) do
    if not taken[m] then
      taken[m] = true
      ntaken = ntaken + 1
      out[#out + 1] = m
      room = room - 1
      if room == 0 then return end
    end
  end
end
if numwant > 0 then
  if A then take(A, numwant) end
  local seed_room = numwant - #out
  take(S, seed_room)
  take(L, numwant - #out)
  if seed_room <= 0 and complete > 0 then
    local has_seed = false
    for _, m in ipairs(out) do
      if redis.call('ZSCORE', S, m) then has_seed = true break end
    end
    if not has_seed then
      for _, m in ipairs(redis.call('ZRANDMEMBER', S, #out + 2)) do
        if not taken[m] then out[#out] = m break end
      end
    end
  end
end
local ids = {}
if ARGV[8] == '1' and #out > 0 then
  ids = redis.call('HMGET', P, unpack(out))
  for i = 1, #ids do ids[i] = ids[i] or '' end
end
return {complete, incomplete, downloaded, index_until, out, ids}
