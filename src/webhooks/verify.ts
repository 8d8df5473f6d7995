/**
 * Webhook signature verification, before anything in a delivery is read.
 *
 * - **Standard Webhooks**: the `standardwebhooks` package computes the `v1` signature over
 *   `<webhook-id>.<webhook-timestamp>.<body>`; retryq checks the timestamp against its own tolerance (the package's
 *   is fixed at 5 minutes) and compares every offered signature in constant time.
 * - **hmac-sha256**: one header of comma-separated `key=value` parts (`t=…,v1=…`, or `sha256=…`), HMAC-SHA256 on
 *   `node:crypto` over the configured signed payload, compared with `timingSafeEqual`.
 *
 * Several secrets (space-separated in the variable) are all tried, for rotations. A failure says what was wrong
 * (missing header, stale timestamp, no matching signature) but never the expected signature or the secret.
 *
 * @example
 * ```ts
 * import { verifierFor } from './verify.js';
 * const verify = verifierFor(source.verify, ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw']);
 * const result = verify({ headers: { 'webhook-id': 'msg_1', … }, body, nowMs: Date.now() });
 * if (!result.ok) console.log(result.reason);
 * ```
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import type { VerifySettings } from '../webhook-config.js';

export type Verification = { ok: true } | { ok: false; reason: string };

export interface SignedRequest {
  /** Lower-cased header names. */
  headers: Readonly<Record<string, string | undefined>>;
  /** The raw body, exactly as received. */
  body: Buffer;
  nowMs: number;
}

export type Verifier = (request: SignedRequest) => Verification;

/** The secrets in a secret variable's value: one, or several separated by whitespace (during a rotation). */
export function splitSecrets(value: string): string[] {
  return value.split(/\s+/).filter(Boolean);
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Checks a Unix-seconds timestamp against the tolerance; `undefined` when it is fine. */
function timestampProblem(text: string | undefined, toleranceMs: number, nowMs: number): string | undefined {
  if (text === undefined || text === '') return 'the timestamp is missing';
  if (!/^\d{1,12}$/.test(text)) return 'the timestamp is not a number of seconds';
  const ageMs = nowMs - Number(text) * 1000;
  if (ageMs > toleranceMs)
    return `the timestamp is ${Math.round(ageMs / 1000)} s old (stale; tolerance ${toleranceMs / 1000} s)`;
  if (-ageMs > toleranceMs)
    return `the timestamp lies ${Math.round(-ageMs / 1000)} s in the future (tolerance ${toleranceMs / 1000} s)`;
  return undefined;
}

/**
 * Builds the verifier of one source. Throws when a secret cannot be used (e.g. not base64 for Standard Webhooks);
 * the message names the problem, never the secret.
 */
export function verifierFor(settings: VerifySettings, secrets: readonly string[]): Verifier {
  if (secrets.length === 0) throw new Error('no signing secret');
  if (settings.scheme === 'standard-webhooks') {
    const hooks = secrets.map((secret, i) => {
      try {
        return new Webhook(secret);
      } catch {
        throw new Error(
          `signing secret ${i + 1} is not a Standard Webhooks secret (base64, optionally prefixed "whsec_")`,
        );
      }
    });
    return ({ headers, body, nowMs }) => {
      const id = headers['webhook-id'];
      const timestamp = headers['webhook-timestamp'];
      const signature = headers['webhook-signature'];
      if (!id || !signature) return { ok: false, reason: 'the webhook-id or webhook-signature header is missing' };
      const late = timestampProblem(timestamp, settings.tolerance, nowMs);
      if (late !== undefined) return { ok: false, reason: late };
      const offered = signature
        .split(' ')
        .map((s) => s.split(','))
        .filter(([version, sig]) => version === 'v1' && sig)
        .map(([, sig]) => sig!);
      if (offered.length === 0) return { ok: false, reason: 'the webhook-signature header holds no v1 signature' };
      const at = new Date(Number(timestamp) * 1000);
      for (const hook of hooks) {
        const expected = hook.sign(id, at, body).split(',')[1] ?? '';
        // Every offered signature is compared (no early exit that would tell which one matched first).
        let match = false;
        for (const sig of offered) match = sameText(sig, expected) || match;
        if (match) return { ok: true };
      }
      return { ok: false, reason: 'no signature matches (forged, or signed with another secret)' };
    };
  }
  const keys = secrets.map((s) => Buffer.from(s, 'utf8'));
  return ({ headers, body, nowMs }) => {
    const header = headers[settings.header];
    if (!header) return { ok: false, reason: `the ${settings.header} header is missing` };
    const parts = header.split(',').map((p) => {
      const eq = p.indexOf('=');
      return eq < 0 ? ['', ''] : [p.slice(0, eq).trim(), p.slice(eq + 1).trim()];
    });
    const offered = parts.filter(([k, v]) => k === settings.signatureKey && v).map(([, v]) => v!);
    if (offered.length === 0)
      return { ok: false, reason: `the ${settings.header} header holds no ${settings.signatureKey}= signature` };
    let timestamp = '';
    if (settings.timestampKey !== undefined) {
      timestamp = parts.find(([k]) => k === settings.timestampKey)?.[1] ?? '';
      const late = timestampProblem(timestamp, settings.tolerance, nowMs);
      if (late !== undefined) return { ok: false, reason: late };
    }
    const [before, after] = splitPayload(settings.signedPayload, timestamp);
    for (const key of keys) {
      const mac = createHmac('sha256', key);
      mac.update(before);
      mac.update(body);
      mac.update(after);
      const expected = mac.digest(settings.encoding);
      let match = false;
      for (const sig of offered) match = sameText(sig, expected) || match;
      if (match) return { ok: true };
    }
    return { ok: false, reason: 'no signature matches (forged, or signed with another secret)' };
  };
}

/** The signed-payload template around `{body}` (validated to contain it), with `{timestamp}` filled in. */
function splitPayload(template: string, timestamp: string): [string, string] {
  const at = template.indexOf('{body}');
  const fill = (s: string) => s.split('{timestamp}').join(timestamp);
  return [fill(template.slice(0, at)), fill(template.slice(at + '{body}'.length))];
}

/** Signs like a Standard Webhooks sender (for the simulator and tests): the three headers for one delivery. */
export function standardWebhookHeaders(
  secret: string,
  id: string,
  body: string | Buffer,
  at: Date,
): { 'webhook-id': string; 'webhook-timestamp': string; 'webhook-signature': string } {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, at, body),
  };
}
