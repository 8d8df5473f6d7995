import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import type { CredentialInCode } from '../../src/worker.js';
import { credentialStore, credentialsInCode } from '../../src/worker.js';

describe('credentials given in code (credentialsInCode)', () => {
  it('get the defaults of a RETRYQ_CREDENTIALS entry, and the workers send the secret in the configured header', () => {
    const { credentials, secrets } = credentialsInCode([
      { id: 'acme', secret: 'sk_test_acme' },
      { id: 'globex', secret: 'gx_key', authHeader: 'x-api-key', authScheme: '', requestsPerMinute: 60 },
    ]);
    expect(credentials[0]).toMatchObject({ id: 'acme', requestsPerMinute: 600, concurrency: 4, authScheme: 'Bearer' });
    expect(credentials[1]).toMatchObject({ id: 'globex', requestsPerMinute: 60, authHeader: 'x-api-key' });
    expect([...secrets]).toEqual([
      ['acme', 'sk_test_acme'],
      ['globex', 'gx_key'],
    ]);
    const store = credentialStore(credentials, secrets);
    expect(store.authHeaders('acme')).toEqual({ authorization: 'Bearer sk_test_acme' });
    expect(store.authHeaders('globex')).toEqual({ 'x-api-key': 'gx_key' });
  });

  it('are refused with every problem at credentials[i].<field>, and no secret in the message', () => {
    const entries = [
      { id: 'acme', secret: '' },
      { id: 'bad id!', secret: 'sk_live_one', requestsPerMinute: 1 },
      { id: 'acme', secret: 'sk_live_two' },
      { id: 'globex', secret: 'sk_live_three', secrte: 'sk_live_four' },
    ] as unknown as CredentialInCode[];
    const err = (() => {
      try {
        credentialsInCode(entries);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ConfigError);
    const paths = (err as ConfigError).problems.map((p) => p.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'credentials[0].secret',
        'credentials[1].id',
        'credentials[1].requestsPerMinute',
        'credentials[2].id',
        'credentials[3]',
      ]),
    );
    expect((err as Error).message).not.toMatch(/sk_live/);
  });

  it('must be an array', () => {
    expect(() => credentialsInCode({ id: 'acme', secret: 'x' } as unknown as CredentialInCode[])).toThrow(
      /credentials: must be an array/,
    );
  });
});
