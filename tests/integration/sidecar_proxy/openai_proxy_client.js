// A tool-using agent written against the official `openai` npm client (pinned in package.json),
// pointed at strata-sidecar's OpenAI-compatible proxy: the client keeps and resends its whole
// message list, as every OpenAI client does; the sidecar manages the context.
//
//   node openai_proxy_client.js BASE_URL TOKEN AGENT_ID TRAJECTORY
// TRAJECTORY (JSON lines) gives the task and the tools' outputs: the k-th tool call is answered
// with the trajectory's k-th tool message. Turns alternate between streamed and not. At the end
// the client edits its first user message and sends the shortened history again.
// Prints one JSON line (a summary the calling test checks against the upstream's request log).
// Exit 0: every check passed; 1: a check failed; 77: the `openai` package is not installed.
'use strict';
const assert = require('assert');
const fs = require('fs');
const path = require('path');

let OpenAI;
try {
  OpenAI = require(path.join(__dirname, '..', '..', '..', 'node_modules', 'openai')).OpenAI;
} catch (e) {
  console.log('SKIP: the openai npm package is not installed (npm ci in the repository root): ' + e.message);
  process.exit(77);
}

const [baseURL, token, agentId, trajectoryPath] = process.argv.slice(2);
if (!trajectoryPath) {
  console.error('usage: node openai_proxy_client.js BASE_URL TOKEN AGENT_ID TRAJECTORY');
  process.exit(2);
}

const trajectory = fs.readFileSync(trajectoryPath, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
const toolOutputs = trajectory.filter((m) => m.role === 'tool').map((m) => m.content);
const toolNames = new Set();
for (const m of trajectory) for (const c of m.tool_calls || []) toolNames.add(c.function.name);
const tools = [...toolNames].sort().map((name) => ({
  type: 'function',
  function: { name, description: 'The ' + name + ' tool', parameters: { type: 'object', properties: {} } },
}));

const client = new OpenAI({ baseURL, apiKey: token, defaultHeaders: { 'X-Strata-Agent': agentId }, maxRetries: 0 });

// One call, streamed or not; returns the assistant message as the client would keep it, and the
// sidecar's "strata" object.
async function call(messages, stream) {
  const request = { model: 'glm-5.3-flash', messages, tools };
  if (!stream) {
    const r = await client.chat.completions.create(request);
    assert.strictEqual(r.object, 'chat.completion');
    assert.strictEqual(r.choices.length, 1);
    assert.strictEqual(r.choices[0].message.role, 'assistant');
    assert.ok(['stop', 'tool_calls', 'length'].includes(r.choices[0].finish_reason), r.choices[0].finish_reason);
    assert.ok(r.usage.prompt_tokens > 0);
    return { message: r.choices[0].message, strata: r.strata, bytes: JSON.stringify(request).length };
  }
  const s = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  let content = '';
  const calls = [];
  let finish = null;
  let usage = null;
  let strata = null;
  for await (const chunk of s) {
    assert.strictEqual(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    if (chunk.strata) strata = chunk.strata;
    if (chunk.choices.length === 0) continue;
    const choice = chunk.choices[0];
    if (choice.finish_reason) finish = choice.finish_reason;
    content += choice.delta.content || '';
    for (const d of choice.delta.tool_calls || []) {
      if (!calls[d.index]) calls[d.index] = { id: '', type: 'function', function: { name: '', arguments: '' } };
      const c = calls[d.index];
      if (d.id) c.id = d.id;
      if (d.function && d.function.name) c.function.name = d.function.name;
      if (d.function && d.function.arguments) c.function.arguments += d.function.arguments;
    }
  }
  assert.ok(finish, 'the stream ended without a finish_reason');
  assert.ok(usage && usage.prompt_tokens > 0, 'no usage chunk');
  const message = { role: 'assistant', content: content || null };
  if (calls.length > 0) message.tool_calls = calls;
  for (const c of calls) assert.ok(c.id && c.function.name, 'a streamed tool call without id or name');
  return { message, strata, bytes: JSON.stringify(request).length };
}

async function main() {
  const system = trajectory.find((m) => m.role === 'system');
  const task = trajectory.find((m) => m.role === 'user');
  const messages = [{ role: 'system', content: system.content }, { role: 'user', content: task.content }];
  const summary = { turns: 0, streamed: 0, tool_calls: 0, compactions: 0, breaks: [], last_request_bytes: 0 };
  let next = 0;
  for (let turn = 0; turn < 16; turn++) {
    const stream = turn % 2 === 1;
    const { message, strata, bytes } = await call(messages, stream);
    summary.turns++;
    if (stream) summary.streamed++;
    summary.last_request_bytes = bytes;
    assert.ok(strata, 'the answer carries no "strata" object');
    assert.strictEqual(strata.agent, agentId);
    assert.strictEqual(strata.reconcile.replaced, false, JSON.stringify(strata.reconcile));
    if (strata.compaction) summary.compactions++;
    if (strata.prefix_break) summary.breaks.push(strata.prefix_break);
    messages.push(message);
    if (!message.tool_calls || message.tool_calls.length === 0) break;
    for (const c of message.tool_calls) {
      summary.tool_calls++;
      messages.push({ role: 'tool', tool_call_id: c.id, content: toolOutputs[next++ % toolOutputs.length] });
    }
  }
  assert.ok(summary.tool_calls >= 3, 'the agent made fewer than 3 tool calls');

  // The client edits its first question and drops everything after it.
  const edited = [messages[0], { role: 'user', content: task.content + '\n(Edited: be brief.)' }];
  const { strata } = await call(edited, false);
  assert.strictEqual(strata.reconcile.replaced, true);
  assert.strictEqual(strata.reconcile.first_difference, 0);
  assert.ok(strata.prefix_break && strata.prefix_break.startsWith('client history replaced'), String(strata.prefix_break));
  summary.edit_break = strata.prefix_break;
  console.log(JSON.stringify(summary));
}

main().catch((e) => {
  console.error('FAILED: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
