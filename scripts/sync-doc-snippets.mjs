#!/usr/bin/env node
// Rewrites every `<!-- snippet: name -->` TypeScript block of docs/guide/modules-and-transactions.md with the
// `// #region name` of its compiled source in test/docs/ (dedented; '../../lib/index.js' shown as
// 'nestjs-db-lock'). Edit the source, run this, commit both: test/unit/module-usage-doc.test.ts
// fails while they differ.
import { readFileSync, writeFileSync } from 'node:fs';

const PAGE = 'docs/guide/modules-and-transactions.md';
const SOURCES = ['test/docs/module-usage.snippets.ts', 'test/docs/data-source.ts'];

const regions = new Map();
for (const source of SOURCES) {
  for (const [, name, body] of readFileSync(source, 'utf8').matchAll(/^[ \t]*\/\/ #region ([\w-]+)\n([\s\S]*?)^[ \t]*\/\/ #endregion \1$/gm)) {
    const lines = body.replace(/\n$/, '').split('\n');
    const indent = Math.min(...lines.filter((l) => l.trim()).map((l) => /^ */.exec(l)[0].length));
    regions.set(name, lines.map((l) => l.slice(indent)).join('\n').replaceAll("'../../lib/index.js'", "'nestjs-db-lock'"));
  }
}
const page = readFileSync(PAGE, 'utf8').replace(/(<!-- snippet: ([\w-]+) -->\n```ts\n)[\s\S]*?```/g, (block, head, name) => {
  if (!regions.has(name)) throw new Error(`no #region ${name} in ${SOURCES.join(', ')}`);
  return `${head}${regions.get(name)}\n\`\`\``;
});
writeFileSync(PAGE, page);
console.log(`${PAGE}: ${regions.size} snippets from ${SOURCES.join(', ')}`);
