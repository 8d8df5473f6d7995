/**
 * The credential of the intent tests, shared by the in-process harness and the worker processes
 * (test/support/worker-process.ts): its id, the simulator API key that is its secret, and its worker-side config.
 */
import { credentialSchema } from '../../src/config.js';
import type { CredentialConfig } from '../../src/config.js';

/** The credential every test intent uses. */
export const CREDENTIAL = 'acme-prod';
/** The simulator API key (the secret) that authenticates {@link CREDENTIAL}; the simulator's default key. */
export const SIM_SECRET = 'sk_test_acme';

/** Worker-side config of the test credential: generous limits, so Temporal's rate limit never paces a test. */
export function testCredential(): CredentialConfig {
  return credentialSchema.parse({
    id: CREDENTIAL,
    secretEnv: 'ACME_PROD_KEY',
    requestsPerMinute: 600_000,
    inspectReserve: 0.2,
    concurrency: 8,
    inspectConcurrency: 4,
  });
}
