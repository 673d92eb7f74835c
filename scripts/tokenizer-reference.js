#!/usr/bin/env node
// Writes the reference token ids strata's BPE is compared against (tests/unit/tokenize): for each
// tokenizer.json given, encodes every message content of the traces plus the hard strings of
// scripts/tokenizer-corpus.js with Hugging Face `tokenizers` (Rust, through @anush008/tokenizers) and
// writes one JSON line per text: {"text": ..., "ids": [...]}. No special tokens are added (the
// post-processor is not applied), matching strata's Encode.
//
//   node scripts/tokenizer-reference.js TRACES_DIR OUT_DIR NAME=PATH/tokenizer.json...
'use strict';
const fs = require('fs');
const path = require('path');
const { HARD_STRINGS, traceTexts } = require('./tokenizer-corpus.js');

async function main() {
  const [tracesDir, outDir, ...specs] = process.argv.slice(2);
  if (!tracesDir || !outDir || specs.length === 0) {
    console.error('usage: tokenizer-reference.js TRACES_DIR OUT_DIR NAME=PATH/tokenizer.json...');
    process.exit(2);
  }
  let Tokenizer;
  try {
    ({ Tokenizer } = require('@anush008/tokenizers'));
  } catch (e) {
    console.error('tokenizer-reference: @anush008/tokenizers is not installed; run scripts/setup (npm ci)');
    process.exit(1);
  }
  const texts = HARD_STRINGS.concat(traceTexts(tracesDir));
  fs.mkdirSync(outDir, { recursive: true });
  for (const spec of specs) {
    const eq = spec.indexOf('=');
    const name = spec.slice(0, eq);
    const file = spec.slice(eq + 1);
    const tok = Tokenizer.fromFile(file);
    const lines = [];
    for (const text of texts) {
      const enc = await tok.encode(text, null, { addSpecialTokens: false });
      lines.push(JSON.stringify({ text, ids: Array.from(enc.getIds()) }));
    }
    const out = path.join(outDir, `${name}.jsonl`);
    fs.writeFileSync(out + '.tmp', lines.join('\n') + '\n');
    fs.renameSync(out + '.tmp', out);
    console.log(`tokenizer-reference: ${name}: ${texts.length} texts -> ${out}`);
  }
}
main().catch((e) => { console.error('tokenizer-reference:', e); process.exit(1); });
