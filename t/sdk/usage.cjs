// One Chat Completions stream through the gateway with the openai SDK,
// asking for usage or not; prints one JSON line: {"ok":true,"text":...,
// "chunks":N,"usage":{...}|null,"empty":N} (empty: chunks without any
// choice), or {"ok":false,"error":{...}}.  Driven by
// t/stream_usage_sdk.t.
//
//   node usage.cjs BASE_URL MODEL ask|no

'use strict';

const path = require('path');

const dir = process.env.OMNI_NPM_DIR
    || path.join(__dirname, '..', '..', 'build', 'npm');

const OpenAI = (function () {
    const m = require(path.join(dir, 'node_modules', 'openai'));
    return m.default || m;
})();

const [baseURL, model, ask] = process.argv.slice(2);

async function run() {
    const client = new OpenAI({ apiKey: 'sk-test', baseURL, maxRetries: 0,
                                timeout: 20000 });
    const req = { model, stream: true,
                  messages: [{ role: 'user', content: 'list the files' }] };

    if (ask === 'ask') {
        req.stream_options = { include_usage: true };
    }

    const stream = await client.chat.completions.create(req);

    let text = '', chunks = 0, empty = 0, usage = null;

    for await (const chunk of stream) {
        chunks++;

        if (!chunk.choices || chunk.choices.length === 0) {
            empty++;
        }

        for (const c of chunk.choices || []) {
            text += (c.delta && c.delta.content) || '';
        }

        if (chunk.usage) {
            usage = chunk.usage;
        }
    }

    return { ok: true, text, chunks, empty, usage };
}

run().then(
    (r) => { process.stdout.write(JSON.stringify(r) + '\n'); },
    (e) => {
        process.stdout.write(JSON.stringify({ ok: false, error: {
            name: e && e.constructor ? e.constructor.name : typeof e,
            message: String(e && e.message) } }) + '\n');
    });
