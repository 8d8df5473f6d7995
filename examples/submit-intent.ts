import { Client, Connection } from '@temporalio/client';
import { IdempotencyConflictError, RetryqClient } from 'retryq';

const client = new Client({ connection: await Connection.connect({ address: 'localhost:7233' }) });
const retryq = new RetryqClient({ client });

try {
  const { key, attached } = await retryq.submit({
    idempotencyKey: 'order-1042-charge',
    credential: 'acme-prod',
    action: {
      method: 'POST',
      url: 'https://api.example.com/v1/charges',
      body: { amount: 1200, currency: 'eur', customer: 'cus_42' },
    },
    // How to look the operation up by key after an unknown outcome (required for writes).
    inspection: { url: 'https://api.example.com/v1/operations/{idempotencyKey}' },
    deadline: '2h', // or an ISO time / Date
    policy: { maxAttempts: 8, baseDelay: '2s', maxBackoff: '5m' },
  });
  console.log(attached ? 'already submitted earlier' : 'submitted');

  const status = await retryq.status(key); // phase, attempts, last evidence, next attempt, permitted-at, log
  console.log(status.phase, status.nextAttemptAt);

  const outcome = await retryq.result(key); // waits: 'succeeded' | 'failed' | 'expired' | 'cancelled'
  if (outcome.phase === 'succeeded') console.log(outcome.result);
  else console.log(outcome.finalReason, outcome.reservation);
} catch (err) {
  // The same key was used before with another body, URL, method or credential: nothing was sent.
  if (err instanceof IdempotencyConflictError) console.error(err.message);
  else throw err;
}
