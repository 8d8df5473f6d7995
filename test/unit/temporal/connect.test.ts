import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { TemporalUnreachableError } from '../../../src/errors.js';
import { unreachable } from '../../../src/temporal/connect.js';

const refused = new Error('14 UNAVAILABLE: No connection established\nmore detail');

describe('when Temporal does not answer', () => {
  it('with TEMPORAL_ADDRESS unset, retryq looks for a local server at 127.0.0.1:7233', () => {
    expect(loadConfig({}).temporal).toMatchObject({ external: false, address: '127.0.0.1:7233' });
  });

  it('names the address it tried and says to start one with `npx retryq dev` or to set TEMPORAL_ADDRESS, never `npm run dev`', () => {
    const err = unreachable(loadConfig({ RETRYQ_DEV_PORT: '7300' }).temporal, refused);
    expect(err).toBeInstanceOf(TemporalUnreachableError);
    expect(err.message).toBe(
      'Cannot reach Temporal at 127.0.0.1:7300: 14 UNAVAILABLE: No connection established. TEMPORAL_ADDRESS is not ' +
        'set, so retryq looked for a local dev server at 127.0.0.1:7300. Start one with `npx retryq dev` (Temporal, ' +
        "its Web UI and the workers), or set TEMPORAL_ADDRESS to your cluster's host:port.",
    );
    expect(err.message).not.toContain('npm run dev');
  });

  it('with TEMPORAL_ADDRESS set, points at the connection settings instead of a dev server', () => {
    const err = unreachable(loadConfig({ TEMPORAL_ADDRESS: 'temporal.internal:7233' }).temporal, refused);
    expect(err.message).toContain('Cannot reach Temporal at temporal.internal:7233');
    expect(err.message).toContain('Check TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and the TLS / API key settings.');
    expect(err.message).not.toContain('retryq dev');
  });
});
