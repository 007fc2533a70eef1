#!/usr/bin/env bash
# The request path's scanners alone (bench/core.c, no nginx): ns per
# document of the body scanner on coding-agent bodies (fixtures/
# agent_body.py: 8 KiB, 150 KiB, 1 MiB), of the usage reader on a
# non-streamed answer, and of the SSE reader on each provider's stream
# fixture.  Best of 7 rounds of 64 MiB each.
#
#   bench/core.sh                  (or: make bench BENCH=core)
#   FIXTURES=/path/to/fixtures bench/core.sh

set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=${FIXTURES:-$root/../shared/fixtures}
out=$root/build/bench/core
bin=$out/core

[ -f "$fixtures/agent_body.py" ] || { echo "core: no fixtures in $fixtures" >&2; exit 1; }

mkdir -p "$out"
cc -std=gnu99 -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter \
    -I"$root/src/core" -o "$bin" "$root/bench/core.c" "$root"/src/core/*.c -lm

for k in 8 150 1024; do
    [ -s "$out/body-$k.json" ] || python3 "$fixtures/agent_body.py" "$k" smart > "$out/body-$k.json"
done

# the mock provider's answer (bench/mock.conf) and a longer one with text
printf '%s' '{"id":"chatcmpl-bench","object":"chat.completion","model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}' \
    > "$out/answer-small.json"
python3 - "$out/answer-long.json" <<'PY'
import json, sys
text = " ".join(["The function returns the parsed value of the line."] * 400)
doc = {"id": "chatcmpl-bench", "object": "chat.completion", "created": 1764570000,
       "model": "gpt-4o-2024-08-06",
       "choices": [{"index": 0, "message": {"role": "assistant", "content": text,
                    "refusal": None}, "logprobs": None, "finish_reason": "stop"}],
       "usage": {"prompt_tokens": 2095, "completion_tokens": 4400, "total_tokens": 6495,
                 "prompt_tokens_details": {"cached_tokens": 1792},
                 "completion_tokens_details": {"reasoning_tokens": 0}}}
open(sys.argv[1], "w").write(json.dumps(doc))
PY

echo "ngx_omniroute core scanners at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores"
printf '%-6s %-44s %10s %12s %12s\n' scan document size time speed
"$bin" json "$out"/body-8.json "$out"/body-150.json "$out"/body-1024.json
"$bin" usage "$out"/answer-small.json "$out"/answer-long.json
"$bin" sse "$fixtures"/streams/*.sse
