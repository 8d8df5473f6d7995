import { readFile } from 'node:fs/promises';
import { createWorkers, credentialsInCode, loadConfig } from 'retryq/worker';
import { retryqEnv } from './settings.mjs';

/**
 * This application's retryq workers, with its own credentials from credentials.json (keep the real one out of git).
 * `connection` is a NativeConnection: `connectWorker(...)` in production, `env.nativeConnection` in a test.
 */
export async function createShopWorkers(connection, file = new URL('../credentials.json', import.meta.url)) {
  const { credentials, secrets } = credentialsInCode(JSON.parse(await readFile(file, 'utf8')));
  const config = { ...loadConfig(retryqEnv), credentials };
  return createWorkers({ config, connection, secrets });
}
