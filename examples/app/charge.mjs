import { RetryqClient } from 'retryq';
import { submitCharge } from './src/charge.mjs';
import { retryqEnv } from './src/settings.mjs';

const retryq = await RetryqClient.connect({ env: retryqEnv });
const { key, attached } = await submitCharge(retryq, { id: process.argv[2] ?? `${Date.now()}`, amount: 1200 });
console.log(`${attached ? 'already submitted' : 'submitted'}: ${key}; waiting for the outcome…`);
const outcome = await retryq.result(key); // succeeded, failed, expired or cancelled
console.log(`${outcome.phase} after ${outcome.attempts} attempt(s); the provider answered`, outcome.result);
await retryq.close();
