// Three real OpenAI clients against strata-sidecar's proxy, each as its users write it: the
// official `openai` client, the OpenAI Agents SDK (`@openai/agents`, OpenAIChatCompletionsModel)
// and LangChain.js (`@langchain/openai` ChatOpenAI with bindTools), all pinned in package.json.
//
//   node proxy_clients.js CLIENT BASE_URL TOKEN AGENT_ID TRAJECTORY
// CLIENT: openai | agents | langchain: a tool conversation of the trajectory's task, the k-th tool
//   call answered with the trajectory's k-th tool message, one turn streamed, the others not.
// CLIENT: retry-plain | retry-stream: one request with the client's own retries on (maxRetries 2):
//   the calling test makes the sidecar's first answer a 429 or a 503.
// Every request the client makes goes through a recording fetch; the last line printed is a JSON
// summary: per request its HTTP status and X-Strata-Reconcile header, and with
// STRATA_RECORD_REQUESTS=FILE the bodies the client sent are written there (JSON lines: the
// recorded fixtures of each client's re-serialization).
// Exit 0: done (the calling test checks the summary); 1: a client failed; 77: packages missing.
'use strict';
const fs = require('fs');
const path = require('path');
const { createRequire } = require('module');

const requireRoot = createRequire(path.join(__dirname, '..', '..', '..', 'package.json'));
function need(name) {
  try {
    return requireRoot(name);
  } catch (e) {
    console.log('SKIP: the npm package ' + name + ' is not installed (npm ci in the repository root): ' + e.message);
    process.exit(77);
  }
}

const [clientName, baseURL, token, agentId, trajectoryPath] = process.argv.slice(2);
if (!baseURL) {
  console.error('usage: node proxy_clients.js CLIENT BASE_URL TOKEN AGENT_ID [TRAJECTORY]');
  process.exit(2);
}
const MODEL = 'glm-5.3-flash';
const { OpenAI } = need('openai');

const exchanges = [];  // one per HTTP request: status, reconcile header, body sent
async function recordingFetch(url, init) {
  const response = await fetch(url, init);
  if (String(url).endsWith('/chat/completions')) {
    exchanges.push({
      status: response.status,
      reconcile: response.headers.get('x-strata-reconcile'),
      retry_after: response.headers.get('retry-after'),
      compaction: response.headers.get('x-strata-compaction'),
      body: typeof init.body === 'string' ? init.body : null,
    });
  }
  return response;
}

function openaiClient(maxRetries) {
  return new OpenAI({
    baseURL, apiKey: token, maxRetries, fetch: recordingFetch,
    defaultHeaders: { 'X-Strata-Agent': agentId },
  });
}

function loadTrajectory() {
  const lines = fs.readFileSync(trajectoryPath, 'utf8').split('\n').filter((l) => l.trim());
  const messages = lines.map((l) => JSON.parse(l));
  const names = new Set();
  for (const m of messages) for (const c of m.tool_calls || []) names.add(c.function.name);
  return {
    system: messages.find((m) => m.role === 'system').content,
    task: messages.find((m) => m.role === 'user').content,
    outputs: messages.filter((m) => m.role === 'tool').map((m) => m.content),
    tools: [...names].sort(),
  };
}

const STREAMED_TURN = 4;
// The simulator answers by the number of assistant messages it sees, so after a compaction it
// repeats turns of the trajectory: the conversations end here.
const MAX_TURNS = 12;  // the one streamed turn (0-based) of the openai and langchain runs

async function runOpenAI(t) {
  const client = openaiClient(0);
  const tools = t.tools.map((name) => ({
    type: 'function',
    function: { name, description: 'The ' + name + ' tool', parameters: { type: 'object', properties: {} } },
  }));
  const messages = [{ role: 'system', content: t.system }, { role: 'user', content: t.task }];
  let k = 0;
  for (let turn = 0; turn < MAX_TURNS; ++turn) {
    let message;
    if (turn === STREAMED_TURN) {
      const stream = await client.chat.completions.create({ model: MODEL, messages, tools, stream: true });
      message = { role: 'assistant', content: '' };
      const calls = [];
      for await (const chunk of stream) {
        const delta = (chunk.choices[0] || {}).delta || {};
        if (delta.content) message.content += delta.content;
        for (const d of delta.tool_calls || []) {
          const c = calls[d.index] || (calls[d.index] = { id: '', type: 'function', function: { name: '', arguments: '' } });
          if (d.id) c.id = d.id;
          if (d.function && d.function.name) c.function.name = d.function.name;
          if (d.function && d.function.arguments) c.function.arguments += d.function.arguments;
        }
      }
      if (calls.length) message.tool_calls = calls;
    } else {
      const { data } = await client.chat.completions.create({ model: MODEL, messages, tools }).withResponse();
      message = data.choices[0].message;
    }
    messages.push(message);
    if (!message.tool_calls || !message.tool_calls.length) break;
    for (const c of message.tool_calls) messages.push({ role: 'tool', tool_call_id: c.id, content: t.outputs[k++ % t.outputs.length] });
  }
}

async function runLangChain(t) {
  const { ChatOpenAI } = need('@langchain/openai');
  const { SystemMessage, HumanMessage, ToolMessage } = need('@langchain/core/messages');
  const model = new ChatOpenAI({
    model: MODEL, apiKey: token, maxRetries: 0,
    configuration: { baseURL, fetch: recordingFetch, defaultHeaders: { 'X-Strata-Agent': agentId } },
  });
  const bound = model.bindTools(t.tools.map((name) => ({
    type: 'function',
    function: { name, description: 'The ' + name + ' tool', parameters: { type: 'object', properties: {} } },
  })));
  const messages = [new SystemMessage(t.system), new HumanMessage(t.task)];
  let k = 0;
  for (let turn = 0; turn < MAX_TURNS; ++turn) {
    let ai;
    if (turn === STREAMED_TURN) {
      for await (const chunk of await bound.stream(messages)) ai = ai ? ai.concat(chunk) : chunk;
    } else {
      ai = await bound.invoke(messages);
    }
    messages.push(ai);
    if (!ai.tool_calls || !ai.tool_calls.length) break;
    for (const c of ai.tool_calls) messages.push(new ToolMessage({ content: t.outputs[k++ % t.outputs.length], tool_call_id: c.id }));
  }
}

async function runAgents(t) {
  const agents = need('@openai/agents');
  agents.setTracingDisabled(true);
  const model = new agents.OpenAIChatCompletionsModel(openaiClient(0), MODEL);
  let k = 0;
  const tools = t.tools.map((name) => agents.tool({
    name, description: 'The ' + name + ' tool', strict: false,
    parameters: { type: 'object', properties: {}, additionalProperties: true },
    execute: async () => t.outputs[k++ % t.outputs.length],
  }));
  const agent = new agents.Agent({ name: 'swe', instructions: t.system, model, tools });
  // The task's tool turns, not streamed; then one more question, streamed.
  const first = await agents.run(agent, t.task, { maxTurns: MAX_TURNS });
  const input = [...first.history, { role: 'user', content: 'Summarize what you did.' }];
  const second = await agents.run(agent, input, { stream: true, maxTurns: MAX_TURNS });
  for await (const _ of second) { /* drained */ }
  await second.completed;
}

async function runRetry(stream) {
  const client = openaiClient(2);
  const request = { model: MODEL, messages: [{ role: 'user', content: 'Say hi.' }] };
  if (!stream) {
    const r = await client.chat.completions.create(request);
    return r.choices[0].message.content;
  }
  let content = '';
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
    content += ((chunk.choices[0] || {}).delta || {}).content || '';
  }
  return content;
}

function record() {
  if (process.env.STRATA_RECORD_REQUESTS) {
    fs.writeFileSync(process.env.STRATA_RECORD_REQUESTS, exchanges.map((e) => e.body + '\n').join(''));
  }
}

// Runs docs/sidecar.md's ```js block of the proxy section against BASE_URL; its answer's content.
async function runDocsSnippet() {
  const doc = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'docs', 'sidecar.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## The OpenAI-compatible proxy'));
  const start = section.indexOf('```js\n') + 6;
  const code = section.slice(start, section.indexOf('```', start)).replace('http://127.0.0.1:8080/v1', baseURL);
  const env = { ...process.env, STRATA_SIDECAR_TOKEN: token };
  const logged = [];
  const log = { log: (...args) => logged.push(args.join(' ')) };
  const ask = new Function('require', 'process', 'console', code + '\nreturn ask;')(
    (name) => (name === 'openai' ? { OpenAI: function (o) { return new OpenAI({ ...o, fetch: recordingFetch }); } } : requireRoot(name)),
    { env }, log);
  const message = await ask([{ role: 'user', content: 'Hello' }]);
  return { content: message.content, logged };
}

async function main() {
  let answer = null;
  if (clientName === 'docs') {
    answer = await runDocsSnippet();
  } else if (clientName === 'retry-plain' || clientName === 'retry-stream') {
    answer = await runRetry(clientName === 'retry-stream');
  } else {
    const t = loadTrajectory();
    const runs = { openai: runOpenAI, agents: runAgents, langchain: runLangChain };
    if (!runs[clientName]) throw new Error('unknown client ' + clientName);
    await runs[clientName](t);
  }
  record();
  console.log(JSON.stringify({
    client: clientName,
    answer,
    requests: exchanges.map(({ status, reconcile, retry_after, compaction }) => ({ status, reconcile, retry_after, compaction })),
  }));
}

main().catch((e) => {
  record();
  console.error('FAILED: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
