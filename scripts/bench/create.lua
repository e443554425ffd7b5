-- wrk script: POST the create body of each request with an Idempotency-Key
-- of its own, so every request creates a deployment instead of replaying
-- the first one. Its argument (after `--`) is a prefix that makes the keys
-- unique to this run. The body comes from the BODY environment variable.
-- It never stops a thread early: wrk divides by the whole duration anyway.

local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("thread_number", threads)
end

local prefix = "bench"
local sent = 0
local body = os.getenv("BODY") or "{}"

function init(args)
  prefix = args[1] or prefix
end

function request()
  sent = sent + 1
  local headers = {}
  for k, v in pairs(wrk.headers) do
    headers[k] = v
  end
  headers["Content-Type"] = "application/json"
  headers["Idempotency-Key"] = prefix .. "-" .. tostring(thread_number) .. "-" .. tostring(sent)
  return wrk.format("POST", wrk.path, headers, body)
end
