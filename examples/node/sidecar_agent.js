#!/usr/bin/env node
// A short tool-using agent in Node.js over strata-sidecar's gRPC API (strata.v1.ContextService),
// with @grpc/grpc-js and @grpc/proto-loader: the sidecar keeps the context (compacted, cache-stable)
// and sends the model requests; this program only runs its tools.
//
//   strata-sidecar --grpc-listen 127.0.0.1:50051 --store agents.db --upstream http://127.0.0.1:8000/v1
//   node examples/node/sidecar_agent.js --target 127.0.0.1:50051 --workspace ./docs \
//       "What is the release date in NOTES.md?"
//
// Options: --target HOST:PORT (default 127.0.0.1:50051), --agent ID (default node-agent-<pid>),
// --workspace DIR (the directory the tools may read; default the current one), --max-turns N
// (default 8). The bearer token, when the sidecar has tenants, comes from STRATA_SIDECAR_TOKEN.
// The proto is read from the repository (proto/strata/v1) or from STRATA_PROTO.
'use strict';
const fs = require('fs');
const path = require('path');

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

function parseArgs(argv) {
  const options = { target: '127.0.0.1:50051', agent: 'node-agent-' + process.pid, workspace: '.', maxTurns: 8, question: '' };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(flag + ' needs a value');
      return argv[++i];
    };
    if (flag === '--target') options.target = value();
    else if (flag === '--agent') options.agent = value();
    else if (flag === '--workspace') options.workspace = value();
    else if (flag === '--max-turns') options.maxTurns = Number(value());
    else if (flag.startsWith('--')) throw new Error('unknown option ' + flag);
    else options.question = flag;
  }
  if (!options.question) throw new Error('give the question as the last argument');
  return options;
}

// The tools: read-only, confined to the workspace directory.
function makeTools(workspace) {
  const root = fs.realpathSync(workspace);
  const inside = (relative) => {
    const full = path.resolve(root, relative);
    if (full !== root && !full.startsWith(root + path.sep)) throw new Error('path ' + relative + ' is outside the workspace');
    return full;
  };
  return {
    list_files: {
      schema: { description: 'List the files of the workspace', parameters: { type: 'object', properties: {} } },
      run: () => fs.readdirSync(root).filter((name) => fs.statSync(path.join(root, name)).isFile()).sort().join('\n'),
    },
    read_file: {
      schema: {
        description: 'Read a file of the workspace',
        parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      },
      run: (args) => fs.readFileSync(inside(args.path), 'utf8'),
    },
  };
}

function loadService() {
  const protoFile = process.env.STRATA_PROTO ||
      path.join(__dirname, '..', '..', 'proto', 'strata', 'v1', 'context_service.proto');
  const definition = protoLoader.loadSync(protoFile, { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
  return grpc.loadPackageDefinition(definition).strata.v1.ContextService;
}

// Promisified unary call with the bearer token.
function unary(client, metadata, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, metadata, (error, response) => (error ? reject(error) : resolve(response)));
  });
}

// One Complete: streams the answer to stdout, resolves with the final Turn.
function complete(client, metadata, request) {
  return new Promise((resolve, reject) => {
    let turn = null;
    const call = client.Complete(request, metadata);
    call.on('data', (event) => {
      if (event.delta && event.delta.kind === 'KIND_CONTENT') process.stdout.write(event.delta.text);
      if (event.turn) turn = event.turn;
    });
    call.on('error', reject);
    call.on('end', () => (turn ? resolve(turn) : reject(new Error('Complete ended without a turn'))));
  });
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const tools = makeTools(options.workspace);
  const ContextService = loadService();
  const client = new ContextService(options.target, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  if (process.env.STRATA_SIDECAR_TOKEN) metadata.set('authorization', 'Bearer ' + process.env.STRATA_SIDECAR_TOKEN);

  const agent_id = options.agent;
  await unary(client, metadata, 'CreateAgent', {
    agent_id,
    spec: { system_prompts: ['You answer questions about the files in the workspace. Use the tools to read them.'] },
  });
  const toolsJson = JSON.stringify(Object.entries(tools).map(([name, t]) => ({ type: 'function', function: { name, ...t.schema } })));
  await unary(client, metadata, 'SetTools', { agent_id, tools_json: toolsJson });

  let request = { agent_id, user_message: options.question };
  let answer = '';
  let toolCalls = 0;
  for (let turn = 0; turn < options.maxTurns; turn++) {
    const done = await complete(client, metadata, request);
    const record = done.record;
    console.log(`\n[turn ${turn + 1}: ${record.input_tokens} input tokens, ` +
                `${record.cached_tokens_predicted} predicted cached, finish ${done.finish_reason}]`);
    if (done.tool_calls.length === 0) {
      answer = done.content;
      break;
    }
    for (const call of done.tool_calls) {
      toolCalls++;
      let content;
      let is_error = false;
      try {
        const tool = tools[call.name];
        if (!tool) throw new Error('unknown tool ' + call.name);
        content = String(tool.run(JSON.parse(call.arguments || '{}')));
      } catch (e) {
        content = 'error: ' + e.message;
        is_error = true;
      }
      console.log(`[tool ${call.name}(${call.arguments}) -> ${content.length} bytes${is_error ? ', error' : ''}]`);
      await unary(client, metadata, 'AppendToolResult', { agent_id, tool_call_id: call.id, content, is_error });
    }
    request = { agent_id, user_message: '' };
  }
  const stats = await unary(client, metadata, 'Stats', { agent_id });
  console.log(JSON.stringify({ agent: agent_id, answer, tool_calls: toolCalls, stats }));
  client.close();
  if (!answer) throw new Error('no answer within ' + options.maxTurns + ' turns');
}

main().catch((e) => {
  console.error('sidecar_agent: ' + (e && e.message ? e.message : e));
  process.exit(1);
});
