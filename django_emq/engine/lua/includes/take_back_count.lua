-- takeBackCount(stats, field, count, counted, mended): undo a guarded
-- HINCRBY of `count` on `field` of the hash `stats` that answered `counted`
-- (includes/complete_jobs.lua, when a later first write met a key of the
-- wrong type). `mended`: the field's old text when it held no integer and the
-- count replaced it (it gets that text back); else a field the count made
-- (counted == count) is removed (a field at "0" reads as one never written,
-- so the two need no read to tell apart), and any other is decremented.
local function takeBackCount(stats, field, count, counted, mended)
  if mended then
    redis.call('HSET', stats, field, mended)
  elseif counted == count then
    redis.call('HDEL', stats, field)
  else
    redis.call('HINCRBY', stats, field, -count)
  end
end
