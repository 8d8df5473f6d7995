/**
 * The bare baseline's one activity: the same HTTP request retryq's dispatch sends (POST, JSON body, Idempotency-Key),
 * through an undici keep-alive pool, answered by the same bench provider.
 */
import { Agent, request } from 'undici';

export function createBareActivities() {
  const dispatcher = new Agent({ keepAliveTimeout: 10_000, connections: 64 });
  return {
    async call(url: string, key: string): Promise<number> {
      const res = await request(url, {
        method: 'POST',
        dispatcher,
        headers: { 'content-type': 'application/json', 'idempotency-key': key, authorization: 'Bearer bench' },
        body: JSON.stringify({ amount: 1200, currency: 'eur', order: key }),
      });
      await res.body.text();
      return res.statusCode;
    },
  };
}

export type BareActivities = ReturnType<typeof createBareActivities>;
