// Baseline half of bench/tokenizer_compare.sh: Hugging Face's Rust tokenizers through its official Node
// binding (npm tokenizers, pinned in package.json). Loads TOKENIZER_JSON three times (best load time),
// then encodes TEXT_FILE split into paragraphs (ends at and includes each "\n\n", as bench/tokenizer_bench.cc
// splits) with one encodeBatch call, without special tokens. Prints one JSON line with the same fields
// tokenizer_bench prints for the figures compared, plus ids_hash over all ids (identical function there).
// Times are process CPU time (process.cpuUsage: user + system, all threads) - run it with
// RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false so the library works on one thread - and wall time.
// Usage: node bench.js NAME TOKENIZER_JSON TEXT_FILE
'use strict';
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

const [name, tokPath, textPath] = process.argv.slice(2);
if (!textPath) {
  console.error('usage: node bench.js NAME TOKENIZER_JSON TEXT_FILE');
  process.exit(2);
}

const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const wall = () => Number(process.hrtime.bigint()) / 1e9;

// FNV-1a over the 32-bit ids plus a multiplicative second lane; the same arithmetic as tokenizer_bench.cc.
function idsHash(encodings) {
  let h1 = 0x811c9dc5, h2 = 0, n = 0;
  for (const e of encodings) {
    for (const id of e.getIds()) {
      h1 = Math.imul(h1 ^ id, 0x01000193) >>> 0;
      h2 = (Math.imul(h2, 31) + id) >>> 0;
      ++n;
    }
  }
  return { hash: h1.toString(16).padStart(8, '0') + h2.toString(16).padStart(8, '0'), n };
}

async function main() {
  const buf = fs.readFileSync(textPath);
  const text = buf.toString('utf8');
  const paragraphs = [];
  for (let s = 0; s < text.length;) {
    let e = text.indexOf('\n\n', s);
    e = e < 0 ? text.length : e + 2;
    paragraphs.push(text.slice(s, e));
    s = e;
  }
  let loadCpu = Infinity, loadWall = Infinity, tok = null;
  for (let r = 0; r < 3; ++r) {
    const c0 = cpu(), w0 = wall();
    tok = Tokenizer.fromFile(tokPath);
    loadCpu = Math.min(loadCpu, cpu() - c0);
    loadWall = Math.min(loadWall, wall() - w0);
  }
  // Warm-up on a little text so one-time setup is not billed to the measured run.
  await tok.encodeBatch(paragraphs.slice(0, 8), { addSpecialTokens: false });
  const c0 = cpu(), w0 = wall();
  const encs = await tok.encodeBatch(paragraphs, { addSpecialTokens: false });
  const encCpu = cpu() - c0, encWall = wall() - w0;
  const { hash, n } = idsHash(encs);
  const mb = buf.length / 1e6;
  console.log(JSON.stringify({
    impl: 'hf-tokenizers-node', tokenizer: name, text_mb: +mb.toFixed(2),
    load_ms: +(loadCpu * 1e3).toFixed(1), load_wall_ms: +(loadWall * 1e3).toFixed(1),
    encode_paragraphs_mb_s: +(mb / encCpu).toFixed(3), encode_paragraphs_wall_mb_s: +(mb / encWall).toFixed(3),
    paragraphs: paragraphs.length, paragraph_tokens: n, ids_hash: hash,
  }));
}
main().catch((e) => { console.error(e); process.exit(1); });
