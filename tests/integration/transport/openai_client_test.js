// strata-sim driven by the official `openai` npm client (pinned in package.json): a simulator that
// the client people actually use cannot read is not a simulator of an OpenAI-compatible server.
//
//   node openai_client_test.js STRATA_SIM_BINARY
// Exit 0: every check passed; 1: a check failed (printed); 77: the `openai` package is not
// installed (run npm ci), reported as a ctest skip.
'use strict';
const { spawn } = require('child_process');
const assert = require('assert');
const path = require('path');

let OpenAI;
try {
  OpenAI = require(path.join(__dirname, '..', '..', '..', 'node_modules', 'openai')).OpenAI;
} catch (e) {
  console.log('SKIP: the openai npm package is not installed (npm ci in the repository root): ' + e.message);
  process.exit(77);
}

const simBinary = process.argv[2];
if (!simBinary) {
  console.error('usage: node openai_client_test.js STRATA_SIM_BINARY');
  process.exit(2);
}

function startSim(extraArgs) {
  return new Promise((resolve, reject) => {
    const child = spawn(simBinary, ['--port', '0', ...extraArgs], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d.toString();
      const m = out.match(/http=127\.0\.0\.1:(\d+)/);
      if (m) resolve({ child, port: Number(m[1]) });
    });
    child.on('exit', (code) => reject(new Error('strata-sim exited with ' + code + ': ' + out)));
  });
}

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Say hello.' },
];

const checks = [];
function check(name, fn) {
  checks.push({ name, fn });
}

check('non-streaming: a chat.completion with the fields a server gives', async (client) => {
  const r = await client.chat.completions.create({ model: 'glm-5.3-flash', messages, max_completion_tokens: 64 });
  assert.match(r.id, /^chatcmpl-/);
  assert.strictEqual(r.object, 'chat.completion');
  assert.strictEqual(typeof r.created, 'number');
  assert.strictEqual(r.model, 'glm-5.3-flash');
  assert.strictEqual(r.choices.length, 1);
  assert.strictEqual(r.choices[0].index, 0);
  assert.strictEqual(r.choices[0].message.role, 'assistant');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.strictEqual(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens > 0);
  assert.strictEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.strictEqual(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

check('streaming with stream_options.include_usage: deltas, a finish_reason, then a usage chunk', async (client) => {
  const stream = await client.chat.completions.create({
    model: 'glm-5.3-flash', messages, stream: true, stream_options: { include_usage: true },
  });
  let content = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.strictEqual(chunk.object, 'chat.completion.chunk');
    assert.match(chunk.id, /^chatcmpl-/);
    if (chunk.choices.length > 0) {
      content += chunk.choices[0].delta.content || '';
      if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    }
    if (chunk.usage) {
      assert.strictEqual(chunk.choices.length, 0, 'the usage chunk has no choices');
      usage = chunk.usage;
    }
  }
  assert.ok(chunks >= 3);
  assert.ok(content.length > 0);
  assert.strictEqual(finish, 'stop');
  assert.ok(usage && usage.completion_tokens > 0 && usage.prompt_tokens > 0);
});

const toolReply = JSON.stringify({
  role: 'assistant',
  content: null,
  tool_calls: [
    { id: 'call_1', type: 'function', function: { name: 'bash', arguments: '{"cmd":"ls -la","cwd":"/tmp"}' } },
    { id: 'call_2', type: 'function', function: { name: 'read', arguments: '{"path":"a.txt"}' } },
  ],
});
const tools = [
  { type: 'function', function: { name: 'bash', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } } },
  { type: 'function', function: { name: 'read', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
];

check('tool calls, whole and streamed (the client assembles the streamed arguments)', async (client) => {
  const opts = { headers: { 'X-Strata-Sim-Reply': toolReply, 'X-Strata-Sim-Chunk': '5' } };
  const r = await client.chat.completions.create({ model: 'glm-5.3-flash', messages, tools }, opts);
  assert.strictEqual(r.choices[0].finish_reason, 'tool_calls');
  const calls = r.choices[0].message.tool_calls;
  assert.strictEqual(calls.length, 2);
  assert.strictEqual(calls[0].id, 'call_1');
  assert.strictEqual(calls[0].type, 'function');
  assert.strictEqual(calls[0].function.name, 'bash');
  assert.deepStrictEqual(JSON.parse(calls[0].function.arguments), { cmd: 'ls -la', cwd: '/tmp' });

  const stream = client.chat.completions.stream({ model: 'glm-5.3-flash', messages, tools, stream: true }, opts);
  const done = await stream.finalChatCompletion();
  const streamed = done.choices[0].message.tool_calls;
  assert.strictEqual(done.choices[0].finish_reason, 'tool_calls');
  assert.strictEqual(streamed.length, 2);
  assert.strictEqual(streamed[1].function.name, 'read');
  assert.deepStrictEqual(JSON.parse(streamed[0].function.arguments), { cmd: 'ls -la', cwd: '/tmp' });
  assert.deepStrictEqual(JSON.parse(streamed[1].function.arguments), { path: 'a.txt' });
});

check('the output cap: finish_reason "length" and completion_tokens equal to the cap', async (client) => {
  const r = await client.chat.completions.create({ model: 'glm-5.3-flash', messages, max_completion_tokens: 3 });
  assert.strictEqual(r.choices[0].finish_reason, 'length');
  assert.strictEqual(r.usage.completion_tokens, 3);
});

async function expectError(promise, status, pattern) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, 'an APIError, got ' + e);
    assert.strictEqual(e.status, status);
    assert.match(e.message, pattern, 'the client reports the server message, got: ' + e.message);
    assert.doesNotMatch(e.message, /no body/);
    assert.strictEqual(e.type, 'BadRequestError');
    return e;
  }
  assert.fail('expected HTTP ' + status);
}

check('errors: the client reports the server message and the param', async (client) => {
  let e = await expectError(
    client.chat.completions.create({ model: 'glm-5.3-flash', messages: [{ role: 'wizard', content: 'x' }] }),
    400, /role "wizard" is not one of/);
  assert.strictEqual(e.param, 'messages[0].role');
  e = await expectError(
    client.chat.completions.create({ model: 'glm-5.3-flash', messages, max_completion_tokens: -1 }),
    400, /max_completion_tokens must be at least 1, got -1/);
  assert.strictEqual(e.param, 'max_completion_tokens');
  await expectError(client.chat.completions.create({ model: 'glm-5.3-flash', messages, max_tokens: 2.5 }),
    400, /"max_tokens" must be an integer, got 2.5/);
  await expectError(client.chat.completions.create({ model: 5, messages }), 400, /"model" must be a string/);
  await expectError(client.chat.completions.create({ model: 'glm-5.3-flash', messages, stream: 'yes' }),
    400, /"stream" must be a boolean/);
  // The same error for a streamed request: refused before the stream starts.
  await expectError(
    client.chat.completions.create({ model: 'glm-5.3-flash', messages: [{ role: 5 }], stream: true }),
    400, /role must be a string/);
});

check('a context-length error reads like vLLM\'s', async (client) => {
  await expectError(
    client.chat.completions.create({ model: 'glm-5.3-flash', messages }, { headers: { 'X-Strata-Sim-Fault': 'oversize' } }),
    400, /maximum context length/);
});

(async () => {
  const { child, port } = await startSim([]);
  const client = new OpenAI({ apiKey: 'sk-sim', baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0, timeout: 20000 });
  let failed = 0;
  for (const { name, fn } of checks) {
    try {
      await fn(client);
      console.log('ok   ' + name);
    } catch (e) {
      failed++;
      console.log('FAIL ' + name + '\n     ' + (e.stack || e));
    }
  }
  child.kill('SIGTERM');
  console.log(failed === 0 ? `all ${checks.length} checks passed` : `${failed} of ${checks.length} checks failed`);
  process.exit(failed === 0 ? 0 : 1);
})().catch((e) => {
  console.log('FAIL ' + (e.stack || e));
  process.exit(1);
});
