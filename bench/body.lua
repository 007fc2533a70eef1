-- wrk script: POST the JSON body read from the file named after `--`:
--
--   wrk -s bench/body.lua URL -- build/bench/bodies/8k-smart.json
--
-- The file is read once per thread at init; every request sends it as is.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer client-gateway-key"

function init(args)
    local name = args[1] or os.getenv("BODY_FILE")
    local f = assert(io.open(name, "rb"))
    wrk.body = f:read("*a")
    f:close()
end
