-- @include "corrupt"
-- @include "type_error"
-- @include "wrong_type"

-- fail(key, err): abort with the corrupt error when err is a type error, else
-- with err itself.
local function fail(key, err)
  if typeError(err) then corrupt(key, wrongType(key, err)) end
  error({err = err})
end
