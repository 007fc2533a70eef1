// The openai SDK against a client key's limits: one request read with
// withResponse() (its x-ratelimit-* headers), then one that meets the
// concurrency cap and is retried by the SDK after the gateway's
// Retry-After.  Prints one JSON line: {"ok":true,"headers":{...},
// "fetches":[{"status":N,"at":MS,"model":M,"retryAfter":S}, ...]} or
// {"ok":false,"error":{...}}.  Driven by t/keys_budget_sdk.t.
//
//   node budget.cjs BASE_URL API_KEY MODEL_FAST MODEL_SLOW

'use strict';

const path = require('path');

const dir = process.env.OMNI_NPM_DIR
    || path.join(__dirname, '..', '..', 'build', 'npm');

const OpenAI = (function () {
    const m = require(path.join(dir, 'node_modules', 'openai'));
    return m.default || m;
})();

const [baseURL, apiKey, fast, slow] = process.argv.slice(2);

const t0 = Date.now();
const fetches = [];

async function recording(url, init) {
    const res = await fetch(url, init);
    let model = null;
    try { model = JSON.parse(init.body).model; } catch (e) { /* none */ }
    fetches.push({ status: res.status, at: Date.now() - t0, model,
                   retryAfter: res.headers.get('retry-after') });
    return res;
}

async function run() {
    const client = new OpenAI({ apiKey, baseURL, maxRetries: 4,
                                timeout: 20000, fetch: recording });
    const msgs = [{ role: 'user', content: 'hi' }];

    const { data, response } = await client.chat.completions
        .create({ model: fast, messages: msgs, max_tokens: 50 })
        .withResponse();

    const headers = {};
    for (const [k, v] of response.headers) {
        if (k.startsWith('x-ratelimit-')) {
            headers[k] = v;
        }
    }

    /* the slow one holds the key's only slot; the next meets the cap */
    const held = client.chat.completions.create({ model: slow,
                                                  messages: msgs });
    await new Promise((r) => setTimeout(r, 300));
    const retried = await client.chat.completions.create({ model: fast,
                                                           messages: msgs });
    await held;

    return { ok: true, headers, text: data.choices[0].message.content,
             retriedText: retried.choices[0].message.content, fetches };
}

run().then((r) => console.log(JSON.stringify(r)), (e) => {
    console.log(JSON.stringify({ ok: false, fetches, error: {
        message: String(e && e.message), status: e && e.status } }));
});
