--[[
  mend_key: the doctor's repair of a key of the wrong type: it is deleted
  (its value is not one django-emq wrote, and no script can use it), so the
  doctor's next steps can rebuild what it should hold from the job rows.

  KEYS[1]  key       any key of the queue

  ARGV[1]  type      the type the key must have

  Returns 1 when the key was deleted, 0 when it had the right type by now.
]]
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == ARGV[1] or kind == 'none' then return 0 end
redis.call('DEL', KEYS[1])
return 1
