#!/usr/bin/env python3
# The streams of bench/run.sh, from a Chat Completions fixture
# (fixtures/streams/openai-chat.sse: metadata first, as providers send):
#
#   mock/sse.conf      the fixture as it is                       (sse)
#   mock/sse400.sse    400 events: the fixture's role chunk, 396 text
#                      deltas of the shape of its first, its last three
#                      events (finish_reason, usage, [DONE])       (sse-400)
#   PACED              40 such events (36 deltas), for bench/paced.py
#                                                                  (sse-paced)
#
# mock/sse.conf is a `return` directive (\ and ' escaped); the 400 events
# are longer than a directive's parameter may be: a file.
#
#   bench/streams.py FIXTURE MOCK_DIR PACED

import sys

text = open(sys.argv[1], encoding="utf-8").read()
assert "$" not in text
ev = [e for e in text.split("\n\n") if e.strip()]
assert '"content":"Hello"' in ev[1] and ev[-1] == "data: [DONE]"

# tokens as a model sends them, an escaped quote and newline among them
words = [" the", " file", " is", " in", " src", "/", "main", ".c", ",",
         " and", " it", " calls", " \\\"parse\\\"", " once", " per",
         " request", ".\\n"]


def stream(deltas):
    out = [ev[0]]
    for i in range(deltas):
        out.append(ev[1].replace('"content":"Hello"',
                                 '"content":"%s"' % words[i % len(words)]))
    return "".join(e + "\n\n" for e in out + ev[-3:])


def conf(name, t):
    with open("%s/%s" % (sys.argv[2], name), "w", encoding="utf-8") as f:
        f.write("return 200 '%s';\n" % t.replace("\\", "\\\\").replace("'", "\\'"))


conf("sse.conf", text)
with open("%s/sse400.sse" % sys.argv[2], "w", encoding="utf-8") as f:
    f.write(stream(396))
with open(sys.argv[3], "w", encoding="utf-8") as f:
    f.write(stream(36))
