import { connectWorker, loadConfig } from 'retryq/worker';
import { retryqEnv } from './src/settings.mjs';
import { createShopWorkers } from './src/workers.mjs';

const connection = await connectWorker(loadConfig(retryqEnv).temporal);
const workers = await createShopWorkers(connection);
process.once('SIGINT', () => workers.shutdown()); // Ctrl-C drains: calls in flight finish
console.log('shop workers polling; Ctrl-C to stop');
await workers.run();
await connection.close();
