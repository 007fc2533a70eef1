#!/usr/bin/env bash
# Start the demo gateway in the foreground: nginx with demo.conf on
# 127.0.0.1:8080 and three local demo providers.  Ctrl-C stops it.
set -euo pipefail

# In a checkout (make demo): the module built there, this folder's
# omniroute_params, build/demo.  Installed from the Debian package (bash
# /usr/share/doc/libnginx-mod-http-omniroute/examples/run-demo.sh): the
# installed module and /etc/nginx/omniroute_params, a prefix under /tmp.
# OMNIROUTE_DEMO_PREFIX picks another prefix.
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/../ngx_omniroute_module.c" ]; then
    root=$(cd "$here/.." && pwd)
    module="$root/build/nginx/ngx_http_omniroute_module.so"
    params="$here/omniroute_params"
    prefix="${OMNIROUTE_DEMO_PREFIX:-$root/build/demo}"
else
    module=/usr/lib/nginx/modules/ngx_http_omniroute_module.so
    params=/etc/nginx/omniroute_params
    prefix="${OMNIROUTE_DEMO_PREFIX:-${TMPDIR:-/tmp}/omniroute-demo}"
fi
for f in "$module" "$params" "$here/demo.conf"; do
    [ -f "$f" ] || { echo "run-demo.sh: $f is missing" >&2; exit 1; }
done

mkdir -p "$prefix"/{keys,tmp,logs}
printf 'sk-demo-flaky\n'  > "$prefix/keys/flaky-1"
printf 'sk-demo-steady\n' > "$prefix/keys/steady-1"
printf 'sk-demo-claude\n' > "$prefix/keys/claude-1"
printf 'demo-admin-token-0123456789\n' > "$prefix/keys/api-token"

sed -e "s|%%MODULE%%|$module|g" -e "s|%%PARAMS%%|$params|g" \
    -e "s|%%PREFIX%%|$prefix|g" "$here/demo.conf" > "$prefix/nginx.conf"

nginx -p "$prefix/" -c "$prefix/nginx.conf" -e "$prefix/logs/error.log" -t \
    >/dev/null

cat <<'MSG'
ngx_omniroute demo on http://127.0.0.1:8080  (Ctrl-C to stop)

Fallback: "smart" tries flaky (always 503), then steady, in one request:

  curl -si http://127.0.0.1:8080/v1/chat/completions \
       -H 'Authorization: Bearer my-gateway-key' \
       -d '{"model":"smart","messages":[{"role":"user","content":"hi"}]}'

  -> 200 from steady, with X-OmniRoute-Connection: steady-1 and
     X-OmniRoute-Attempts: 2 and X-OmniRoute-Trail: flaky-1;503;..ms,
     steady-1;200;..ms (your gateway key is not forwarded; steady
     sees its own key sk-demo-steady).  Run it again: flaky's connection
     is cooling down (3 s, doubling on each failure), so steady answers at
     once (X-OmniRoute-Attempts: 1).

Ask flaky alone while it cools down: 503 with Retry-After and diagnostics:

  curl -si http://127.0.0.1:8080/v1/chat/completions -d '{"model":"flaky/gpt-4o"}'


The models clients may ask for (what an OpenAI SDK's models.list() gets):

  curl -s http://127.0.0.1:8080/v1/models

An alias rewritten to the upstream model name:

  curl -s http://127.0.0.1:8080/v1/chat/completions -d '{"model":"gpt-4o"}'

A provider directly, with its x-api-key and anthropic-version headers:

  curl -s http://127.0.0.1:8080/v1/messages -d '{"model":"claude/claude-sonnet-4"}'

The admin API, metrics and the live status page (token
demo-admin-token-0123456789):

  curl -s http://127.0.0.1:8081/api/monitoring/health \
       -H 'Authorization: Bearer demo-admin-token-0123456789'
  curl -s http://127.0.0.1:8081/metrics \
       -H 'Authorization: Bearer demo-admin-token-0123456789'
  open http://127.0.0.1:8081/status#token=demo-admin-token-0123456789

Errors are JSON in the OpenAI shape:

  curl -s http://127.0.0.1:8080/v1/chat/completions -d '{"model":"nope"}'

MSG

exec nginx -p "$prefix/" -c "$prefix/nginx.conf" -e "$prefix/logs/error.log"
