import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

/**
 * docs/guide/modules-and-transactions.md shows only compiled code: each TypeScript block is marked
 * `<!-- snippet: name -->` and must be, word for word, the `#region name` of a file in test/docs/
 * (compiled with the tests). Imports of the library read '../../lib/index.js' there and
 * 'nestjs-db-lock' on the page.
 */
const root = new URL('../../../', import.meta.url);
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8');
const SOURCES = ['test/docs/module-usage.snippets.ts', 'test/docs/data-source.ts'];

function regions(): Map<string, string> {
  const found = new Map<string, string>();
  for (const source of SOURCES) {
    const text = read(source);
    for (const match of text.matchAll(/^[ \t]*\/\/ #region ([\w-]+)\n([\s\S]*?)^[ \t]*\/\/ #endregion \1$/gm)) {
      found.set(match[1]!, dedent(match[2]!).replaceAll("'../../lib/index.js'", "'nestjs-db-lock'"));
    }
  }
  return found;
}

function dedent(text: string): string {
  const lines = text.replace(/\n$/, '').split('\n');
  const indent = Math.min(...lines.filter((l) => l.trim()).map((l) => /^ */.exec(l)![0].length));
  return lines.map((l) => l.slice(indent)).join('\n');
}

describe('docs/guide/modules-and-transactions.md', () => {
  it('every TypeScript block is a compiled snippet, word for word (node scripts/sync-doc-snippets.mjs rewrites them)', () => {
    const page = read('docs/guide/modules-and-transactions.md');
    const snippets = regions();
    const blocks = [...page.matchAll(/(?:<!-- snippet: ([\w-]+) -->\n)?```ts\n([\s\S]*?)```/g)];
    assert.ok(blocks.length >= 8, `only ${blocks.length} blocks`);
    const used = new Set<string>();
    for (const [, name, code] of blocks) {
      assert.ok(name, `a TypeScript block without a snippet marker:\n${code}`);
      const snippet = snippets.get(name);
      assert.ok(snippet !== undefined, `no #region ${name} in ${SOURCES.join(', ')}`);
      assert.equal(code!.replace(/\n$/, ''), snippet, `block '${name}' differs from its compiled source`);
      used.add(name);
    }
    assert.deepEqual(
      [...snippets.keys()].filter((name) => !used.has(name)),
      [],
      'every region is shown on the page',
    );
  });
});
