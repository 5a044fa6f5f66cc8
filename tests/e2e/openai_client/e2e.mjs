// End-to-end test of `lathe serve` with the official openai npm package (pinned in package.json; `make
// setup` installs it). tests/e2e/openai_client_test.cc starts two servers and runs this script; by hand:
//   node tests/e2e/openai_client/e2e.mjs --base-url http://127.0.0.1:PORT --api-key KEY --model NAME \
//     [--tool-base-url http://127.0.0.1:PORT2 --tool-model NAME2 --tool-request request.json] [--only REGEX]
// --base-url serves a random-weight model (text, sampling, logprobs, errors); --tool-base-url a model that
// answers the chat request in --tool-request ({messages, tools}) greedily with a call of get_weather
// {"city": "Paris"} (tests/e2e/text_models.h). Each case prints "ok - NAME" or "not ok - NAME" and why;
// the exit code is 1 when any failed.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import OpenAI, {
  APIError,
  AuthenticationError,
  BadRequestError,
  NotFoundError,
} from 'openai';

const { values: opt } = parseArgs({
  options: {
    'base-url': { type: 'string' },
    'api-key': { type: 'string' },
    model: { type: 'string' },
    'tool-base-url': { type: 'string' },
    'tool-model': { type: 'string' },
    'tool-request': { type: 'string' },
    only: { type: 'string' },
  },
});
for (const k of ['base-url', 'api-key', 'model']) if (!opt[k]) throw new Error(`--${k} is required`);
const withTools = Boolean(opt['tool-base-url']);
if (withTools && !(opt['tool-model'] && opt['tool-request']))
  throw new Error('--tool-base-url needs --tool-model and --tool-request');

// No retries: the SDK retries 408/409/429/5xx and lost connections by default, which would hide a server
// that fails once and answers the second time.
const clientFor = (root, apiKey) => new OpenAI({ baseURL: `${root}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });
const root = opt['base-url'].replace(/\/+$/, '');
const client = clientFor(root, opt['api-key']);
const model = opt.model;
const toolRoot = withTools ? opt['tool-base-url'].replace(/\/+$/, '') : null;
const toolClient = withTools ? clientFor(toolRoot, opt['api-key']) : null;
const toolRequest = withTools ? JSON.parse(readFileSync(opt['tool-request'], 'utf8')) : null;

const kMaxN = 16;  // the server's limit on n (docs/serving.md, "Validation and errors")

// ---- the cases ---------------------------------------------------------------------------------------
const cases = [];
const test = (name, fn) => cases.push({ name, fn });

function checkUsage(usage, { completionTokens } = {}) {
  assert.ok(usage, 'usage is missing');
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens'])
    assert.ok(Number.isInteger(usage[k]) && usage[k] >= 0, `usage.${k} = ${usage[k]}`);
  assert.ok(usage.prompt_tokens > 0, 'usage.prompt_tokens is 0');
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens, 'total = prompt + completion');
  if (completionTokens !== undefined) assert.equal(usage.completion_tokens, completionTokens, 'usage.completion_tokens');
}
const usageNumbers = (u) => ({ prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens,
                               total_tokens: u.total_tokens });

// Awaits `promise`, which must reject with an instance of `Klass` of HTTP `status`, and with the given
// fields of the error body (type, code, param); returns the error.
async function rejects(promise, Klass, status, fields = {}) {
  let err = null;
  try {
    await promise;
  } catch (e) {
    err = e;
  }
  assert.ok(err, `expected ${Klass.name} (${status}); the request succeeded`);
  assert.ok(err instanceof Klass, `expected ${Klass.name} (${status}), got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.status, status, `HTTP status (${err.message})`);
  for (const [k, v] of Object.entries(fields)) assert.equal(err[k], v, `error.${k} (${err.message})`);
  return err;
}

// The server still answers after an error: a one-token chat completion.
async function stillAnswers(c = client, name = model) {
  const r = await c.chat.completions.create({ model: name, messages: [{ role: 'user', content: 'ping' }],
                                              max_tokens: 1, temperature: 0 });
  assert.equal(r.choices.length, 1, 'the server no longer answers after the error');
  checkUsage(r.usage, { completionTokens: 1 });
}

const chatRequest = { model, messages: [{ role: 'user', content: 'Hello! Who are you?' }], max_tokens: 8, temperature: 0 };

test('models: /v1/models lists the served model', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.ok(ids.includes(model), `${model} not in ${JSON.stringify(ids)}`);
});

test('completions: max_tokens 5 gives 5 tokens, finish_reason length, consistent usage', async () => {
  const r = await client.completions.create({ model, prompt: 'The quick brown fox', max_tokens: 5, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(typeof c.text, 'string');
  assert.ok(c.text.length > 0, 'empty text');
  assert.equal(c.finish_reason, 'length');
  checkUsage(r.usage, { completionTokens: 5 });
});

// The greedy answer to chatRequest, which the streamed case compares against.
let greedyChat = null;
test('chat: a message gets an assistant message, a finish_reason and usage', async () => {
  const r = await client.chat.completions.create(chatRequest);
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(c.message.content.length > 0, 'empty content');
  assert.ok(['stop', 'length'].includes(c.finish_reason), `finish_reason ${c.finish_reason}`);
  checkUsage(r.usage);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 8, `completion_tokens ${r.usage.completion_tokens}`);
  greedyChat = r;
});

test('chat streaming with include_usage: role first, deltas, finish_reason, one usage chunk last, same text', async () => {
  const want = greedyChat ?? (await client.chat.completions.create(chatRequest));
  const stream = await client.chat.completions.create({ ...chatRequest, stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.ok(chunks.length >= 3, `only ${chunks.length} chunks`);
  for (const ch of chunks) {
    assert.equal(ch.object, 'chat.completion.chunk');
    assert.equal(ch.id, chunks[0].id, 'one id for every chunk');
    assert.equal(ch.model, model);
  }
  // Exactly one usage chunk, the last, with no choices; every other chunk has "usage": null.
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, [], 'the last chunk has choices');
  assert.deepEqual(usageNumbers(last.usage), usageNumbers(want.usage), 'streamed usage differs from the non-streamed one');
  for (const ch of chunks.slice(0, -1)) assert.equal(ch.usage, null, `a chunk before the last has usage ${JSON.stringify(ch.usage)}`);
  const choiceChunks = chunks.slice(0, -1);
  for (const ch of choiceChunks) {
    assert.equal(ch.choices.length, 1);
    assert.equal(ch.choices[0].index, 0);
  }
  assert.equal(choiceChunks[0].choices[0].delta.role, 'assistant', 'the first delta has no role');
  const finishes = choiceChunks.map((ch) => ch.choices[0].finish_reason);
  assert.equal(finishes.at(-1), want.choices[0].finish_reason, 'finish_reason of the last choice chunk');
  assert.ok(finishes.slice(0, -1).every((f) => f === null), `finish_reason before the last chunk: ${JSON.stringify(finishes)}`);
  const content = choiceChunks.map((ch) => ch.choices[0].delta.content ?? '').join('');
  assert.ok(choiceChunks.filter((ch) => ch.choices[0].delta.content).length >= 1, 'no content delta');
  assert.equal(content, want.choices[0].message.content, 'streamed text differs from the greedy answer');
});

test('seed: temperature 1 and seed 42 twice give the same text, seed 43 another', async () => {
  const req = { model, messages: [{ role: 'user', content: 'Tell me a story.' }], temperature: 1, max_tokens: 24 };
  const a = await client.chat.completions.create({ ...req, seed: 42 });
  const b = await client.chat.completions.create({ ...req, seed: 42 });
  const c = await client.chat.completions.create({ ...req, seed: 43 });
  // A random-weight model's next-token distribution is close to uniform over ~150k tokens: two different
  // samples of 24 tokens agree by chance with probability ~1e-124.
  assert.equal(a.usage.completion_tokens, 24, 'the sample stopped early');
  assert.equal(b.choices[0].message.content, a.choices[0].message.content, 'seed 42 did not reproduce its sample');
  assert.notEqual(c.choices[0].message.content, a.choices[0].message.content, 'seeds 42 and 43 gave the same sample');
});

test('n=2 with a seed: choices 0 and 1, reproduced by the same request', async () => {
  const req = { model, messages: [{ role: 'user', content: 'Say something.' }], temperature: 1, seed: 7, n: 2, max_tokens: 6 };
  const r = await client.chat.completions.create(req);
  assert.equal(r.choices.length, 2);
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1]);
  for (const c of r.choices) {
    assert.equal(c.message.role, 'assistant');
    assert.equal(typeof c.message.content, 'string');
    assert.ok(['stop', 'length'].includes(c.finish_reason), `finish_reason ${c.finish_reason}`);
  }
  checkUsage(r.usage);
  assert.ok(r.usage.completion_tokens >= 2 && r.usage.completion_tokens <= 12, `completion_tokens ${r.usage.completion_tokens} for 2 x 6`);
  const again = await client.chat.completions.create(req);
  const byIndex = (x) => [...x.choices].sort((p, q) => p.index - q.index).map((c) => c.message.content);
  assert.deepEqual(byIndex(again), byIndex(r), 'the seeded n=2 request was not reproduced');
});

const isLogprob = (x) => typeof x === 'number' && Number.isFinite(x) && x <= 0;
// Greedy: the chosen token is the most likely one, so its logprob is the first (largest) alternative's.
const kLogprobTol = 1e-5;

test('logprobs: completions logprobs 2 (greedy): one entry per token, top alternatives sorted', async () => {
  const r = await client.completions.create({ model, prompt: 'The quick brown fox', max_tokens: 4, temperature: 0, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  assert.ok(lp, 'no logprobs');
  const n = r.usage.completion_tokens;
  assert.equal(n, 4);
  for (const k of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset'])
    assert.equal(lp[k]?.length, n, `logprobs.${k} has ${lp[k]?.length} entries for ${n} tokens`);
  assert.equal(lp.tokens.join(''), r.choices[0].text, 'the tokens do not spell the text');
  for (let i = 0; i < n; ++i) {
    assert.ok(isLogprob(lp.token_logprobs[i]), `token_logprobs[${i}] = ${lp.token_logprobs[i]}`);
    const top = lp.top_logprobs[i];
    const values = Object.values(top);
    // Two alternatives, or one when both decode to the same text (an object keeps one key per text);
    // the sampled token is added when it is not among them, which greedy never needs.
    assert.ok(values.length >= 1 && values.length <= 2, `top_logprobs[${i}] = ${JSON.stringify(top)}`);
    assert.ok(values.every(isLogprob), `top_logprobs[${i}] = ${JSON.stringify(top)}`);
    assert.ok(Math.abs(Math.max(...values) - lp.token_logprobs[i]) <= kLogprobTol,
              `greedy token ${i} is not the top alternative: ${lp.token_logprobs[i]} vs ${JSON.stringify(top)}`);
    // Sorted, as the server wrote them: JavaScript objects move integer-like keys ("7") to the front in
    // numeric order, so the order of the keys is only the server's when there are none.
    if (!Object.keys(top).some((k) => /^(0|[1-9][0-9]*)$/.test(k)))
      for (let j = 1; j < values.length; ++j) assert.ok(values[j - 1] >= values[j], `top_logprobs[${i}] not sorted: ${JSON.stringify(top)}`);
    if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1], `text_offset decreases at ${i}`);
  }
});

test('logprobs: chat logprobs true, top_logprobs 2 (greedy): one entry per token, top alternatives sorted', async () => {
  const r = await client.chat.completions.create({ ...chatRequest, max_tokens: 4, logprobs: true, top_logprobs: 2 });
  const content = r.choices[0].logprobs?.content;
  assert.ok(Array.isArray(content), `logprobs.content: ${JSON.stringify(r.choices[0].logprobs)}`);
  assert.equal(content.length, r.usage.completion_tokens, 'one logprobs entry per generated token');
  assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content, 'the tokens do not spell the content');
  for (const [i, e] of content.entries()) {
    assert.equal(typeof e.token, 'string');
    assert.ok(isLogprob(e.logprob), `content[${i}].logprob = ${e.logprob}`);
    if (e.bytes !== null && e.bytes !== undefined) assert.ok(Array.isArray(e.bytes), `content[${i}].bytes`);
    assert.equal(e.top_logprobs.length, 2, `content[${i}].top_logprobs = ${JSON.stringify(e.top_logprobs)}`);
    for (const t of e.top_logprobs) assert.ok(isLogprob(t.logprob) && typeof t.token === 'string', JSON.stringify(t));
    assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob, `content[${i}].top_logprobs not sorted`);
    assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) <= kLogprobTol,
              `greedy token ${i} is not the top alternative: ${e.logprob} vs ${JSON.stringify(e.top_logprobs)}`);
  }
});

if (withTools) {
  const toolChat = { model: opt['tool-model'], ...toolRequest, temperature: 0, max_tokens: 64 };
  const wantArgs = { city: 'Paris' };

  test('tool call: the memorised request gives tool_calls get_weather {"city": "Paris"}, finish_reason tool_calls', async () => {
    const r = await toolClient.chat.completions.create(toolChat);
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', `finish_reason ${c.finish_reason}; message ${JSON.stringify(c.message)}`);
    assert.ok(c.message.content === null || c.message.content === '', `content ${JSON.stringify(c.message.content)}`);
    assert.equal(c.message.tool_calls?.length, 1, `tool_calls ${JSON.stringify(c.message.tool_calls)}`);
    const call = c.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.ok(typeof call.id === 'string' && call.id.length > 0, `id ${call.id}`);
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), wantArgs);
    checkUsage(r.usage);
  });

  test('tool call streamed: delta.tool_calls fragments assemble the same call', async () => {
    const stream = await toolClient.chat.completions.create({ ...toolChat, stream: true });
    const calls = [];
    let content = '';
    let finish = null;
    for await (const chunk of stream) {
      for (const ch of chunk.choices) {
        assert.equal(finish, null, 'a chunk after the finish_reason');
        content += ch.delta.content ?? '';
        for (const tc of ch.delta.tool_calls ?? []) {
          assert.ok(Number.isInteger(tc.index), `tool call delta without index: ${JSON.stringify(tc)}`);
          if (!calls[tc.index]) {
            // The first delta of a call names it; later ones carry argument fragments.
            assert.ok(typeof tc.id === 'string' && tc.id.length > 0, `first delta of call ${tc.index} has no id`);
            assert.equal(tc.type, 'function');
            assert.equal(typeof tc.function?.name, 'string', `first delta of call ${tc.index} has no name`);
            calls[tc.index] = { id: tc.id, name: tc.function.name, arguments: tc.function.arguments ?? '' };
          } else {
            if (tc.function?.name) assert.equal(tc.function.name, calls[tc.index].name, 'a later delta renames the call');
            calls[tc.index].arguments += tc.function?.arguments ?? '';
          }
        }
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
    assert.equal(finish, 'tool_calls', `finish_reason ${finish}; content ${JSON.stringify(content)}`);
    assert.equal(content, '', `content deltas beside the call: ${JSON.stringify(content)}`);
    assert.equal(calls.length, 1, `calls ${JSON.stringify(calls)}`);
    assert.equal(calls[0].name, 'get_weather');
    assert.deepEqual(JSON.parse(calls[0].arguments), wantArgs);
  });
}

// ---- errors: each checks the SDK's error class and status, then that the server still answers --------
test('vLLM sampling extensions: prompt_logprobs, then allowed_token_ids and bad_words built from them', async () => {
  const prompt = 'The quick brown fox jumps over the lazy dog';
  // prompt_logprobs 0: per prompt token after the first, {"<id>": {logprob, rank, decoded_token}}.
  const p = await client.completions.create({ model, prompt, max_tokens: 1, prompt_logprobs: 0 });
  const plp = p.choices[0].prompt_logprobs;
  assert.ok(Array.isArray(plp) && plp.length >= 5, `prompt_logprobs = ${JSON.stringify(plp)}`);
  assert.equal(plp[0], null);
  const ids = [], texts = new Set();
  for (const entry of plp.slice(1)) {
    const [id, v] = Object.entries(entry)[0];
    assert.ok(isLogprob(v.logprob) && v.rank >= 1 && typeof v.decoded_token === 'string', JSON.stringify(entry));
    ids.push(Number(id));
    texts.add(v.decoded_token);
  }
  // allowed_token_ids: every sampled token is one of the prompt's.
  const a = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 1, seed: 3, logprobs: 0,
                                              ignore_eos: true, allowed_token_ids: ids });
  for (const t of a.choices[0].logprobs.tokens) assert.ok(texts.has(t), `token ${JSON.stringify(t)} is not allowed`);
  // bad_words: banning the greedy first token's word changes the first token.
  const g = await client.completions.create({ model, prompt, max_tokens: 3, temperature: 0, logprobs: 0, ignore_eos: true });
  const first = g.choices[0].logprobs.tokens[0];
  if (first.trim() !== '') {
    const b = await client.completions.create({ model, prompt, max_tokens: 3, temperature: 0, logprobs: 0,
                                                ignore_eos: true, bad_words: [first.trim()] });
    assert.notEqual(b.choices[0].logprobs.tokens[0], first, `bad word ${JSON.stringify(first)} was generated`);
  }
  await assert.rejects(client.completions.create({ model, prompt, max_tokens: 1, allowed_token_ids: [] }),
                       (e) => e.status === 400, 'allowed_token_ids [] accepted');
});

test('error: wrong API key is AuthenticationError 401', async () => {
  await rejects(clientFor(root, 'not-the-key').chat.completions.create(chatRequest), AuthenticationError, 401,
                { code: 'invalid_api_key' });
  await rejects(clientFor(root, 'not-the-key').models.list(), AuthenticationError, 401);
  await stillAnswers();
});

test('error: unknown model is NotFoundError 404', async () => {
  await rejects(client.chat.completions.create({ ...chatRequest, model: 'no-such-model' }), NotFoundError, 404,
                { code: 'model_not_found' });
  await stillAnswers();
});

test('error: max_tokens over the context is BadRequestError 400', async () => {
  await rejects(client.chat.completions.create({ ...chatRequest, max_tokens: 1_000_000 }), BadRequestError, 400,
                { code: 'context_length_exceeded' });
  await stillAnswers();
});

test('error: a prompt longer than the context is BadRequestError 400', async () => {
  const prompt = 'hello '.repeat(4000);  // one token per word: far over any context this test serves
  await rejects(client.completions.create({ model, prompt, max_tokens: 1 }), BadRequestError, 400,
                { code: 'context_length_exceeded' });
  await stillAnswers();
});

test(`error: n over the limit (${kMaxN}) is BadRequestError 400`, async () => {
  await rejects(client.chat.completions.create({ ...chatRequest, n: kMaxN + 1 }), BadRequestError, 400, { param: 'n' });
  await stillAnswers();
});

test('error: temperature as a string is BadRequestError 400', async () => {
  await rejects(client.chat.completions.create({ ...chatRequest, temperature: 'hot' }), BadRequestError, 400,
                { param: 'temperature', type: 'invalid_request_error' });
  await stillAnswers();
});

test('error: malformed JSON is 400 invalid_request_error (plain fetch)', async () => {
  const res = await fetch(`${root}/v1/chat/completions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${opt['api-key']}`, 'Content-Type': 'application/json' },
    body: `{"model": "${model}", "messages": [{"role": "user", "content": "hi"}`,
  });
  assert.equal(res.status, 400);
  const body = await res.json();
  assert.equal(body.error?.type, 'invalid_request_error', JSON.stringify(body));
  assert.equal(typeof body.error?.message, 'string');
  await stillAnswers();
});

// The value of a Prometheus sample `name{labels}` whose labels include `match` (summed over matches).
function metric(text, name, match = '') {
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (!(rest.startsWith('{') || rest.startsWith(' ')) || !rest.includes(match)) continue;
    sum += Number(rest.slice(rest.lastIndexOf(' ') + 1));
    found = true;
  }
  assert.ok(found, `no ${name}${match ? `{${match}}` : ''} in /metrics`);
  return sum;
}
const getMetrics = async () => {
  const res = await fetch(`${root}/metrics`);
  assert.equal(res.status, 200, '/metrics');
  return res.text();
};

test('abort: a stream the client aborts is aborted on the server, which then answers and is healthy', async () => {
  const abortsBefore = metric(await getMetrics(), 'vllm:request_success_total', 'finished_reason="abort"');
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model, messages: [{ role: 'user', content: 'Write a long essay.' }], temperature: 1, seed: 1, max_tokens: 400,
      ignore_eos: true, stream: true },
    { signal: controller.signal });
  let received = 0;
  let finished = null;
  for await (const chunk of stream) {  // the SDK ends the loop quietly once the signal aborts it
    received += 1;
    finished = chunk.choices[0]?.finish_reason ?? finished;
    if (chunk.choices[0]?.delta?.content) controller.abort();
  }
  assert.ok(received >= 1, 'no chunk before the abort');
  assert.equal(finished, null, 'the stream finished before the client aborted it');
  // The engine notices the hang-up and frees the request: the abort counter moves and nothing runs.
  const deadline = Date.now() + 10_000;
  let m = await getMetrics();
  while ((metric(m, 'vllm:request_success_total', 'finished_reason="abort"') <= abortsBefore ||
          metric(m, 'vllm:num_requests_running') !== 0) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    m = await getMetrics();
  }
  assert.equal(metric(m, 'vllm:request_success_total', 'finished_reason="abort"'), abortsBefore + 1, 'aborted requests');
  assert.equal(metric(m, 'vllm:num_requests_running'), 0, 'requests still running after the abort');
  await stillAnswers();
  const health = await fetch(`${root}/health`);
  assert.equal(health.status, 200, '/health after the abort');
});

// ---- run -------------------------------------------------------------------------------------------
const only = opt.only ? new RegExp(opt.only) : null;
let failed = 0;
let ran = 0;
for (const { name, fn } of cases) {
  if (only && !only.test(name)) continue;
  ran += 1;
  const t0 = performance.now();
  try {
    await fn();
    console.log(`ok - ${name} (${Math.round(performance.now() - t0)} ms)`);
  } catch (e) {
    failed += 1;
    console.log(`not ok - ${name}`);
    const detail = e instanceof APIError ? `${e.constructor.name} ${e.status}: ${e.message}` : (e?.stack ?? String(e));
    console.log(detail.split('\n').map((l) => `  # ${l}`).join('\n'));
  }
}
console.log(`# ${ran - failed} of ${ran} passed${withTools ? '' : ' (tool-call cases not run: no --tool-base-url)'}`);
process.exitCode = failed > 0 || ran === 0 ? 1 : 0;
