/** The baseline's activity: one POST; a non-2xx answer is an error that Temporal's default retry policy retries. */
import { ApplicationFailure } from '@temporalio/common';
import { request } from 'undici';
import type { Dispatcher } from 'undici';

export function plainActivities(http: Dispatcher, secret: string) {
  return {
    async post(url: string, idempotencyKey: string, body: unknown): Promise<number> {
      const res = await request(url, {
        dispatcher: http,
        method: 'POST',
        headers: {
          authorization: `Bearer ${secret}`,
          'content-type': 'application/json',
          'idempotency-key': idempotencyKey,
        },
        body: JSON.stringify(body),
      });
      await res.body.text();
      if (res.statusCode >= 200 && res.statusCode < 300) return res.statusCode;
      throw ApplicationFailure.retryable(`HTTP ${res.statusCode}`, `HTTP${res.statusCode}`);
    },
  };
}
export type PlainActivities = ReturnType<typeof plainActivities>;
