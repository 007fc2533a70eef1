// Streams one request through the gateway with a real SDK and prints the
// outcome as one JSON line: {"ok":true,"text":...,"events":N,
// "finish":...} (the last finish_reason / stop_reason seen) when the
// SDK's stream ended without raising, {"ok":false,"error":{...}} when it
// raised.  Driven by t/stream_sdk.t.
//
//   node stream.cjs openai-chat|openai-responses|anthropic BASE_URL MODEL
//
// The SDKs are resolved from OMNI_NPM_DIR (build/npm by default), where
// `make sdk-deps` installs the versions pinned in t/sdk/package.json.

'use strict';

const path = require('path');

const dir = process.env.OMNI_NPM_DIR
    || path.join(__dirname, '..', '..', 'build', 'npm');

function load(name) {
    const m = require(path.join(dir, 'node_modules', name));
    return m.default || m;
}

const [kind, baseURL, model] = process.argv.slice(2);

async function run() {
    let text = '';
    let events = 0;
    let finish = null;

    if (kind === 'openai-chat') {
        const OpenAI = load('openai');
        const client = new OpenAI({ apiKey: 'sk-test', baseURL,
                                    maxRetries: 0, timeout: 20000 });
        const stream = await client.chat.completions.create({
            model, stream: true,
            messages: [{ role: 'user', content: 'list the files' }] });

        for await (const chunk of stream) {
            events++;
            for (const c of chunk.choices || []) {
                text += (c.delta && c.delta.content) || '';
                finish = c.finish_reason || finish;
            }
        }

    } else if (kind === 'openai-responses') {
        const OpenAI = load('openai');
        const client = new OpenAI({ apiKey: 'sk-test', baseURL,
                                    maxRetries: 0, timeout: 20000 });
        const stream = await client.responses.create({
            model, stream: true, input: 'list the files' });

        for await (const ev of stream) {
            events++;
            if (ev.type === 'response.output_text.delta') {
                text += ev.delta;
            }
            if (ev.response && ev.response.incomplete_details) {
                finish = ev.response.incomplete_details.reason || finish;
            }
        }

    } else if (kind === 'anthropic') {
        const Anthropic = load('@anthropic-ai/sdk');
        const client = new Anthropic({ apiKey: 'sk-test', baseURL,
                                       maxRetries: 0, timeout: 20000 });
        const stream = await client.messages.create({
            model, max_tokens: 256, stream: true,
            messages: [{ role: 'user', content: 'list the files' }] });

        for await (const ev of stream) {
            events++;
            if (ev.type === 'content_block_delta'
                && ev.delta.type === 'text_delta')
            {
                text += ev.delta.text;
            }
            if (ev.type === 'message_delta') {
                finish = ev.delta.stop_reason || finish;
            }
        }

    } else {
        throw new Error('unknown SDK kind ' + kind);
    }

    return { ok: true, text, events, finish };
}

run().then(
    (r) => { process.stdout.write(JSON.stringify(r) + '\n'); },
    (e) => {
        process.stdout.write(JSON.stringify({ ok: false, error: {
            name: e && e.constructor ? e.constructor.name : typeof e,
            status: e && e.status !== undefined ? e.status : null,
            message: String(e && e.message),
            body: e && e.error !== undefined ? e.error : null } }) + '\n');
    });
