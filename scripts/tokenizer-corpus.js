// Shared by scripts/tokenizer-reference.js and bench/tokenize-compare.js: the texts strata's tokenizer
// tests and benchmarks run on. Every message content of the traces (sorted by file, in line order),
// then a fixed set of hard strings.
'use strict';
const fs = require('fs');
const path = require('path');

const HARD_STRINGS = [
  '', ' ', '  ', '\n', '\r\n', '\t\t\n\n  \n', ' '.repeat(200), '\n'.repeat(50), ' \n \n\t \u00a0 \u3000x',
  'Hello, world!', "I'm sure it's what they'd've said; we'll SEE'S", "DON'T 'LL 's 'S",
  '0', '12', '123', '1234', '12345678901234567890', '3.14159e-10', '-42', '1,000,000', '٣٤٥ ١٢', '①②③ ⅷ ½',
  '😀', '👩‍👩‍👧‍👦 family', '🇫🇷🇯🇵', '👍🏽 ok', 'emoji😀in😀text',
  '中文分词测试，这是一个句子。', '日本語のテキストとカタカナ、ひらがな。', '한국어 텍스트입니다', 'mixed中文and English123',
  'e\u0301 cafe\u0301 \u0041\u030A n\u0303', 'Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319', 'ﬁ ﬂ ＡＢＣ１２３ ｶﾀｶﾅ',
  'Ελληνικά κείμενο', 'Русский текст, ЁЖИК', 'עברית וערבית العربية', 'हिन्दी पाठ', 'ไทย ภาษา',
  '\u200b\u200c\u200d\ufeff zero width', '\ufffd replacement \ufffd\ufffd', '\u0000 nul \u0001\u001f ctl',
  '\ud83d\ude00 pair', 'lone \\ud800 escape text', '\u00ff\u00fe\u0080\u0081 latin1-looking', 'Ã©Ã¨ mojibake â€™',
  'def f(x):\n    return x**2  # square\n\n\nclass A(B):\n\tpass\n',
  'for (int i = 0; i < n; ++i) { a[i] += b[i] >> 2; }',
  '<div class="x">&amp;&lt;</div>', 'https://example.com/a/b?c=d&e=f#g', 'path/to/file_name.py:123:45',
  '$ ls -la | grep "^d" && echo $?', '{"key": [1, 2.5, null, true], "k2": "v"}',
  '<|im_start|>user\nhi<|im_end|>', '<think>\nreasoning\n</think>\n\nanswer', '<tool_call>x</tool_call>',
  '<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>', '<|endoftext|><|endoftext|>', '<|im_start', 'im_end|>',
  '[gMASK]<sop><|system|>', '!!!???...,,,;;;', '----====____****', '   leading and trailing   ',
  'a\u0300\u0301\u0302\u0303\u0304\u0305', 'x'.repeat(3000), 'ab'.repeat(1000) + ' ' + '9'.repeat(100),
];

function traceFiles(tracesDir) {
  const out = [];
  for (const sub of fs.readdirSync(tracesDir).sort()) {
    const dir = path.join(tracesDir, sub);
    if (!fs.statSync(dir).isDirectory()) continue;
    for (const f of fs.readdirSync(dir).sort()) if (f.endsWith('.jsonl')) out.push(path.join(dir, f));
  }
  return out;
}

function traceTexts(tracesDir) {
  const texts = [];
  for (const file of traceFiles(tracesDir)) {
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      const m = JSON.parse(line);
      if (typeof m.content === 'string') texts.push(m.content);
    }
  }
  return texts;
}

module.exports = { HARD_STRINGS, traceTexts };
