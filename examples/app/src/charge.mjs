import { providerUrl } from './settings.mjs';

/** Submits the charge of one order, once: the order id is the idempotency key, so a second submit attaches. */
export async function submitCharge(retryq, order, provider = providerUrl) {
  return retryq.submit({
    idempotencyKey: `charge-${order.id}`,
    credential: 'acme', // an id from credentials.json: the secret stays with the workers
    action: { method: 'POST', url: `${provider}/v1/charges`, body: { amount: order.amount, currency: 'eur' } },
    inspection: { url: `${provider}/v1/operations/{idempotencyKey}` }, // how to look it up after a lost answer
    deadline: '2h',
  });
}
