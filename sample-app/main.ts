import { Logger } from '@nestjs/common';
import { readSampleConfig, SampleConfigError } from './config/sample-config.js';
import { createSampleApp } from './create-app.js';
import { DatabaseUnreachableError, ensureDatabase } from './database/ensure-database.js';

/** `npm run sample`: check the settings and the database, then serve. */
async function main(): Promise<void> {
  const config = readSampleConfig();
  await ensureDatabase(config.databaseUrl);
  const app = await createSampleApp(config);
  await app.listen(config.port);
  const base = `http://localhost:${config.port}`;
  const logger = new Logger('Sample');
  logger.log(`Listening on ${base}`);
  logger.log(`Try: curl -X POST ${base}/loans/1/repay -H 'content-type: application/json' -d '{"cents":500}'`);
  logger.log(`     curl ${base}/loans/1          # the loan and its claims`);
  logger.log(`     curl ${base}/locks/log        # what the lock did`);
}

main().catch((error: unknown) => {
  // The failures users can fix get one clear message, not a stack trace.
  if (error instanceof DatabaseUnreachableError) console.error(`\n${error.help(process.env.npm_lifecycle_event ?? 'sample')}\n`);
  else if (error instanceof SampleConfigError) console.error(`\nInvalid setting: ${error.message}\n`);
  else new Logger('Sample').error(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exit(1);
});
