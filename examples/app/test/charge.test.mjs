import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import { RetryqClient } from 'retryq';
import { createTimeSkippingEnvironment } from 'retryq/testing';
import { submitCharge } from '../src/charge.mjs';
import { retryqEnv } from '../src/settings.mjs';
import { createShopWorkers } from '../src/workers.mjs';

// The provider: a real HTTP server on a free port. Its first answer is a rate limit for an hour, then it charges.
const requests = [];
const provider = createServer((req, res) => {
  requests.push({ auth: req.headers.authorization, key: req.headers['idempotency-key'] });
  if (requests.length === 1) {
    res.writeHead(429, { 'retry-after': '3600', 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { code: 'rate_limited' } }));
  } else {
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: 'ch_1', status: 'succeeded' }));
  }
});

let env; // Temporal's time-skipping test server: an hour of waiting takes a moment
before(async () => {
  await new Promise((resolve) => provider.listen(0, '127.0.0.1', resolve));
  env = await createTimeSkippingEnvironment();
});
after(async () => {
  await env?.teardown();
  provider.close();
});

test('a charge rate-limited for an hour (Retry-After: 3600) is sent again an hour later, and succeeds', async () => {
  const workers = await createShopWorkers(env.nativeConnection);
  const running = workers.run();
  try {
    const retryq = new RetryqClient({ client: env.client, taskQueuePrefix: retryqEnv.RETRYQ_TASK_QUEUE_PREFIX });
    const { key } = await submitCharge(
      retryq,
      { id: 'order-1042', amount: 1200 },
      `http://127.0.0.1:${provider.address().port}`,
    );
    const outcome = await retryq.result(key);

    assert.equal(outcome.phase, 'succeeded');
    assert.equal(outcome.attempts, 2);
    assert.deepEqual(outcome.result.body, { id: 'ch_1', status: 'succeeded' });
    // The second attempt waited the hour the provider asked for (in the test server's time).
    const [first, second] = outcome.attemptLog.filter((a) => a.kind === 'dispatch').map((a) => Date.parse(a.startedAt));
    assert.ok(second - first >= 3600_000, `the second attempt came ${(second - first) / 1000} s after the first`);
    // Both attempts carried the same idempotency key and the credential's secret from credentials.json.
    assert.deepEqual(requests, [
      { auth: 'Bearer sk_test_acme', key: 'charge-order-1042' },
      { auth: 'Bearer sk_test_acme', key: 'charge-order-1042' },
    ]);
  } finally {
    workers.shutdown();
    await running;
  }
});
