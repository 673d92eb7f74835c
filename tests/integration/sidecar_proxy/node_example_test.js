// The strata-sidecar program end to end, from Node: starts strata-sim (replaying a tool-using
// conversation as the model) and strata-sidecar with --grpc-listen and --http-listen on free ports,
// runs examples/node/sidecar_agent.js over gRPC, checks the HTTP listener (health, a chat
// completion with curl-like fetch), then SIGTERMs the sidecar and expects a clean drain.
//
//   node node_example_test.js STRATA_SIM STRATA_SIDECAR TRAJECTORY
// Exit 0: passed; 1: failed; 77: @grpc/grpc-js or @grpc/proto-loader is not installed (npm ci).
'use strict';
const { spawn, execFile } = require('child_process');
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');

const root = path.join(__dirname, '..', '..', '..');
for (const name of ['@grpc/grpc-js', '@grpc/proto-loader']) {
  try {
    require.resolve(name, { paths: [root] });
  } catch (e) {
    console.log('SKIP: the ' + name + ' npm package is not installed (npm ci in the repository root)');
    process.exit(77);
  }
}

const [simBinary, sidecarBinary, trajectory] = process.argv.slice(2);
if (!trajectory) {
  console.error('usage: node node_example_test.js STRATA_SIM STRATA_SIDECAR TRAJECTORY');
  process.exit(2);
}

// Starts `binary` and resolves with the child and the stdout lines matching each of `patterns`.
function start(binary, args, patterns) {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stderr.on('data', (d) => (err += d.toString()));
    child.stdout.on('data', (d) => {
      out += d.toString();
      const found = patterns.map((p) => out.match(p));
      if (found.every((m) => m)) resolve({ child, found, stderr: () => err });
    });
    child.on('exit', (code) => reject(new Error(path.basename(binary) + ' exited with ' + code + ': ' + out + err)));
  });
}

function run(args) {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { timeout: 60000, cwd: root }, (error, stdout, stderr) =>
      resolve({ code: error ? error.code : 0, stdout, stderr }));
  });
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-node-example-'));
  const workspace = path.join(dir, 'workspace');
  fs.mkdirSync(workspace);
  fs.writeFileSync(path.join(workspace, 'NOTES.md'), 'Release date: 2026-12-01\n');
  fs.writeFileSync(path.join(workspace, 'README.md'), 'A workspace.\n');

  const sim = await start(simBinary, ['--port', '0', '--trajectory', trajectory], [/http=127\.0\.0\.1:(\d+)/]);
  const upstream = 'http://127.0.0.1:' + sim.found[0][1] + '/v1';
  const sidecar = await start(sidecarBinary,
    ['--grpc-listen', '127.0.0.1:0', '--http-listen', '127.0.0.1:0', '--store', path.join(dir, 'sidecar.db'), '--upstream', upstream],
    [/^grpc listening on 127\.0\.0\.1:(\d+)$/m, /^http listening on 127\.0\.0\.1:(\d+)$/m]);
  const grpcTarget = '127.0.0.1:' + sidecar.found[0][1];
  const http = 'http://127.0.0.1:' + sidecar.found[1][1];
  try {
    // The example agent over gRPC: it lists the files, reads NOTES.md, answers.
    const example = await run([path.join(root, 'examples', 'node', 'sidecar_agent.js'), '--target', grpcTarget,
      '--agent', 'notes', '--workspace', workspace, 'What is the release date in NOTES.md, and which files are there?']);
    assert.strictEqual(example.code, 0, example.stdout + example.stderr);
    const summary = JSON.parse(example.stdout.trim().split('\n').pop());
    assert.strictEqual(summary.tool_calls, 2);
    assert.match(summary.answer, /2026-12-01/);
    assert.strictEqual(Number(summary.stats.requests), 3);
    assert.match(example.stdout, /\[tool read_file\(\{"path":"NOTES.md"\}\) -> 25 bytes\]/);

    // The HTTP listener of the same process.
    const health = await fetch(http + '/healthz');
    assert.strictEqual(health.status, 200);
    const reply = await fetch(http + '/v1/chat/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Strata-Agent': 'http-agent' },
      body: JSON.stringify({ model: 'glm-5.3-flash', messages: [{ role: 'user', content: 'What is in NOTES.md?' }] }),
    });
    assert.strictEqual(reply.status, 200);
    assert.strictEqual(reply.headers.get('x-strata-agent'), 'http-agent');
    const body = await reply.json();
    assert.strictEqual(body.object, 'chat.completion');
    assert.strictEqual(body.choices[0].message.tool_calls[0].function.name, 'list_files');
  } finally {
    const exited = new Promise((resolve) => sidecar.child.on('exit', (code, signal) => resolve({ code, signal })));
    sidecar.child.kill('SIGTERM');
    const { code } = await exited;
    sim.child.kill('SIGTERM');
    assert.strictEqual(code, 0, 'strata-sidecar did not exit 0 after SIGTERM: ' + sidecar.stderr());
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log('node example: ok');
}

main().catch((e) => {
  console.error('FAILED: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
