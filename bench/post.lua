-- wrk script: a small chat-completion POST
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer client-gateway-key"
wrk.body = '{"model":"bench","messages":[{"role":"user","content":"Say hi"}],"max_tokens":16}'
