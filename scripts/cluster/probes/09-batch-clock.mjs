// Probe 9: which time UTC_TIMESTAMP(6) / NOW(6) return in the statements of one multi-statement
// batch, on a Galera node and on the plain server (read-only; PLAIN_URL overrides 127.0.0.1:3306).
// A statement that sleeps 100 ms sits between two reads of the clock; SYSDATE(6) is the real time.
//   node scripts/cluster/probes/09-batch-clock.mjs [rounds=20]
import { mysql, describe } from './common.mjs';
import { nodeUrl } from '../galera.mjs';

const rounds = Number(process.argv[2] ?? 20);
const batch = 'SELECT UTC_TIMESTAMP(6) AS a; DO SLEEP(0.1); SELECT UTC_TIMESTAMP(6) AS b, NOW(6) AS n, SYSDATE(6) AS s';
const us = (text) => Date.parse(`${text.replace(' ', 'T')}Z`) * 1000 + Number(text.slice(-3));

for (const [label, url] of [
  ['galera node 1', nodeUrl(1)],
  ['galera node 2', nodeUrl(2)],
  ['plain server', process.env.PLAIN_URL ?? 'mysql://root@127.0.0.1:3306'],
]) {
  const conn = await mysql.createConnection({ uri: url, multipleStatements: true, dateStrings: true });
  const steps = [];
  try {
    for (let i = 0; i < rounds; i++) {
      const [results] = await conn.query(batch);
      const a = results[0][0].a;
      const { b, s } = results[2][0];
      steps.push({ clock: (us(b) - us(a)) / 1000, real: (us(s) - us(a)) / 1000 });
    }
    const same = steps.filter((x) => x.clock === 0).length;
    const min = Math.min(...steps.map((x) => x.clock));
    const max = Math.max(...steps.map((x) => x.clock));
    console.log(
      `${label}: clock advanced between the batch's first and third statement by ${min.toFixed(3)}-${max.toFixed(3)} ms ` +
        `(real time ${Math.min(...steps.map((x) => x.real)).toFixed(1)}-${Math.max(...steps.map((x) => x.real)).toFixed(1)} ms); ` +
        `${same}/${rounds} batches saw one time for every statement`,
    );
  } catch (err) {
    console.log(`${label}: ${describe(err)}`);
  } finally {
    await conn.end();
  }
}
