#!/usr/bin/env node
// The Hugging Face reference tokenizer (Rust `tokenizers` through @anush008/tokenizers) on the
// traces' message contents (scripts/tokenizer-corpus.js traceTexts, the texts
// bench/python_tokenize.py reads), for the Python tokenizer binding's comparison:
//   node bench/python_tokenize_hf.js ids TRACES_DIR TOKENIZER_JSON
//       one JSON line per text: its ids (tests/python/test_tokenize_hf.py compares them with
//       strata.Tokenizer.encode)
//   node bench/python_tokenize_hf.js bench TRACES_DIR TOKENIZER_JSON [MIN_SECONDS]
//       one JSON line per way of calling it: {"impl", "bytes", "passes", "cpu_seconds",
//       "wall_seconds", "tokens"} per pass (bench/python-tokenize prints them next to strata's)
// One core: run with TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1.
'use strict';
const fs = require('fs');
const { traceTexts } = require('../scripts/tokenizer-corpus.js');

function cpuSeconds() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

async function main() {
  const [mode, tracesDir, tokenizerFile, minSecondsArg] = process.argv.slice(2);
  if (!['ids', 'bench'].includes(mode) || !tracesDir || !tokenizerFile) {
    console.error('usage: python_tokenize_hf.js ids|bench TRACES_DIR TOKENIZER_JSON [MIN_SECONDS]');
    process.exit(2);
  }
  if (!fs.existsSync(tokenizerFile)) {
    console.error(`python_tokenize_hf.js: ${tokenizerFile} not found (run scripts/setup)`);
    process.exit(2);
  }
  const { Tokenizer } = require('@anush008/tokenizers');
  const hf = Tokenizer.fromFile(tokenizerFile);
  const texts = traceTexts(tracesDir);
  const encode = async (t) => (await hf.encode(t, null, { addSpecialTokens: false })).getIds();
  if (mode === 'ids') {
    const out = [];
    for (const t of texts) out.push(JSON.stringify(Array.from(await encode(t))));
    process.stdout.write(out.join('\n') + '\n');
    return;
  }
  const minSeconds = Number(minSecondsArg || 3);
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, 'utf8'), 0);
  const perText = async () => {
    let n = 0;
    for (const t of texts) n += (await encode(t)).length;
    return n;
  };
  // One encodeBatch call: the Rust library's own speed without a promise per text.
  const batch = async () => {
    let n = 0;
    for (const e of await hf.encodeBatch(texts, { addSpecialTokens: false })) n += e.getIds().length;
    return n;
  };
  for (const [impl, fn] of [['hf_tokenizers_rust_per_text', perText], ['hf_tokenizers_rust_batch', batch]]) {
    await fn();  // warm up
    let passes = 0, tokens = 0;
    const wall0 = process.hrtime.bigint(), cpu0 = cpuSeconds();
    do {
      tokens = await fn();
      passes++;
    } while (Number(process.hrtime.bigint() - wall0) / 1e9 < minSeconds);
    const wall = Number(process.hrtime.bigint() - wall0) / 1e9, cpu = cpuSeconds() - cpu0;
    console.log(JSON.stringify({ impl, bytes, passes, cpu_seconds: cpu / passes,
                                 wall_seconds: wall / passes, tokens }));
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
