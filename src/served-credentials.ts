/**
 * Which credentials live workers serve, as the Temporal server sees it: a credential is served when some worker
 * polls its dispatch task queue (`<prefix>.actions.<credential>`). Read with the public DescribeTaskQueue API; the
 * server lists a poller for a few minutes after its last poll, so a worker that stopped a moment ago still counts.
 *
 * `submit` uses it to refuse an intent that no worker could ever send (see docs/client-api.md, "Unknown
 * credentials"); the candidates it names as served are the credentials whose load control is active (their entity
 * workflows) and any the client was told about.
 *
 * @example
 * ```ts
 * const serving = await credentialServing(client, 'retryq', 'acme-prod'); // { served: true, pollers: 2 }
 * const served = await servedCredentials(client, 'retryq', ['acme-prod', 'acme-test']); // ['acme-prod']
 * ```
 */
import type { Client } from '@temporalio/client';
import { isGrpcServiceError } from '@temporalio/client';
import proto from '@temporalio/proto';
import { taskQueues } from './task-queues.js';

// @temporalio/proto is CommonJS: the enums come from its default export.

/** What the server knows about the workers of one credential. */
export interface CredentialServing {
  /** `true` when at least one worker polls the credential's dispatch queue; `undefined` when the server cannot say. */
  served: boolean | undefined;
  /** Workers polling it. */
  pollers: number;
}

const GRPC_UNIMPLEMENTED = 12;

/** Whether a live worker polls `credential`'s dispatch queue. */
export async function credentialServing(
  client: Client,
  prefix: string,
  credential: string,
): Promise<CredentialServing> {
  try {
    const answer = await client.workflowService.describeTaskQueue({
      namespace: client.options.namespace,
      taskQueue: {
        name: taskQueues(prefix).actions(credential),
        kind: proto.temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL,
      },
      taskQueueType: proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    });
    const pollers = answer.pollers?.length ?? 0;
    return { served: pollers > 0, pollers };
  } catch (err) {
    // A server without the API (the time-skipping test server) cannot say: the check is skipped, not failed.
    if (isGrpcServiceError(err) && Number(err.code) === GRPC_UNIMPLEMENTED) return { served: undefined, pollers: 0 };
    throw err;
  }
}

/** Credentials whose load control is active (their entity workflows run), newest first; at most `limit`. */
export async function activeCredentials(client: Client, prefix: string, limit: number): Promise<string[]> {
  const out: string[] = [];
  const query =
    `WorkflowType = "credentialWorkflow" AND ExecutionStatus = "Running" ` +
    `AND TaskQueue = "${taskQueues(prefix).credentials}"`;
  try {
    for await (const wf of client.workflow.list({ query, pageSize: limit })) {
      const id = /^credential:([^@]+)(?:@.*)?$/.exec(wf.workflowId)?.[1];
      if (id) out.push(id);
      if (out.length >= limit) break;
    }
  } catch {
    // Visibility unavailable: name only the credentials the client knows.
  }
  return out;
}

/**
 * The credentials among `known` and the active ones that live workers serve, sorted; at most 20 are looked up.
 */
export async function servedCredentials(
  client: Client,
  prefix: string,
  known: readonly string[] = [],
): Promise<string[]> {
  const candidates = [...new Set([...known, ...(await activeCredentials(client, prefix, 20))])].slice(0, 20);
  const served = await Promise.all(
    candidates.map(async (c) =>
      (await credentialServing(client, prefix, c).catch(() => undefined))?.served ? c : undefined,
    ),
  );
  return served.filter((c): c is string => c !== undefined).sort();
}
