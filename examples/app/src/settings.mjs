// Where this application's retryq runs: its own task queues ("shop.workflows", "shop.actions.acme", …), so that it
// shares a Temporal server with other retryq applications (or `npx retryq dev`'s own workers) without mixing.
// Everything else (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, …) comes from the environment; unset means 127.0.0.1:7233.
export const retryqEnv = { RETRYQ_TASK_QUEUE_PREFIX: 'shop', ...process.env };

// The paid API this application calls; `npx retryq sim --port 4010` serves a simulated one.
export const providerUrl = process.env.PROVIDER_URL ?? 'http://127.0.0.1:4010';
