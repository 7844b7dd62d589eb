import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { GUARANTEES, KNOWN_GAPS, appliesTo, contractTargets, type ContractTarget, type Guarantee } from '../support/contract-targets.js';
import { STRATEGY_CAPABILITIES } from '../support/strategies.js';

/** The compiled lock test files (build/test/<folder>), each of which must declare the guarantee it proves. */
const FOLDERS = ['contract', 'lease', 'row-lock'] as const;
/** Its tests name their strategy per test: one for lease's pool, one for row-lock's guard. */
const PER_TEST_STRATEGY = new Set(['contract/connections.test.js']);

function lockTestFiles(): { file: string; text: string }[] {
  return FOLDERS.flatMap((folder) => {
    const dir = fileURLToPath(new URL(`../${folder}/`, import.meta.url));
    return readdirSync(dir)
      .filter((name) => name.endsWith('.test.js'))
      .map((name) => ({ file: `${folder}/${name}`, text: readFileSync(`${dir}${name}`, 'utf8') }));
  });
}

const declared = (text: string): string[] => [...text.matchAll(/contractSuite\(\s*'([^']+)'/g)].map((m) => m[1]!);

describe('the contract registry', () => {
  it('every lock test file declares the guarantee it proves, and every guarantee has a file', () => {
    const used = new Set<string>();
    for (const { file, text } of lockTestFiles()) {
      const names = declared(text);
      if (!PER_TEST_STRATEGY.has(file)) assert.ok(names.length > 0, `${file} declares no guarantee (contractSuite)`);
      for (const name of names) {
        assert.ok(Object.hasOwn(GUARANTEES, name), `${file}: unknown guarantee '${name}'`);
        used.add(name);
      }
      for (const m of text.matchAll(/(?:appliesTo|gapOf)\(\s*'([^']+)'/g)) used.add(m[1]!);
    }
    assert.deepEqual(
      Object.keys(GUARANTEES).filter((g) => !used.has(g)),
      [],
      'guarantees no test proves',
    );
  });

  it('strategy-specific guarantees select one strategy; shared ones both; a target without a store gets only store-free ones', () => {
    const target = (strategy: 'lease' | 'row-lock', store: boolean): ContractTarget => ({
      name: strategy,
      strategy,
      server: 'memory',
      capabilities: new Set([...STRATEGY_CAPABILITIES[strategy], ...(store ? (['processes', 'mysql-server', 'sql-tables'] as const) : [])]),
      options: (extra) => ({ ...(extra ?? ({} as never)), strategy }),
    });
    const on = (guarantee: Guarantee): string[] =>
      [target('lease', true), target('row-lock', true)].filter((t) => appliesTo(guarantee, t)).map((t) => t.strategy);
    assert.deepEqual(on('exclusion'), ['lease', 'row-lock']);
    assert.deepEqual(on('bounded-wait'), ['lease', 'row-lock']);
    assert.deepEqual(on('lease-takeover'), ['lease']);
    assert.deepEqual(on('stale-holder'), ['lease']);
    assert.deepEqual(on('fenced-commit'), ['lease']);
    assert.deepEqual(on('holder-connection'), ['row-lock']);
    const inMemory = target('lease', false);
    const storeFree = (Object.keys(GUARANTEES) as Guarantee[]).filter((g) => appliesTo(g, inMemory));
    assert.ok(storeFree.length > 0 && !storeFree.includes('exclusion'), `store-free guarantees: ${storeFree.join(', ')}`);
  });

  it('every known gap names a guarantee that applies to its strategy', () => {
    const targets = contractTargets();
    for (const [guarantee, gaps] of Object.entries(KNOWN_GAPS)) {
      for (const strategy of Object.keys(gaps ?? {})) {
        const target = targets.find((t) => t.strategy === strategy);
        if (target) assert.ok(appliesTo(guarantee as Guarantee, target), `${guarantee} does not apply to ${strategy}: the gap hides nothing`);
      }
    }
  });
});
