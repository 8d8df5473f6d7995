/**
 * Task queue names (see DESIGN.md "Task queues"), derived from the configurable prefix. Workflow-safe.
 *
 * @example
 * ```ts
 * import { taskQueues } from './task-queues.js';
 * taskQueues('retryq').actions('acme-prod'); // 'retryq.actions.acme-prod'
 * ```
 */

/** The three kinds of task queue retryq uses. */
export interface TaskQueues {
  /** Intent workflows. */
  workflows: string;
  /** Dispatch activities of one credential (its rate and concurrency limit apply here, across all workers). */
  actions: (credential: string) => string;
  /** Inspection activities of one credential: separate capacity, so inspections are never starved. */
  inspect: (credential: string) => string;
  /**
   * The credentials' load-control entity workflows: their own queue, so that handing out send slots never waits
   * behind a burst of intent workflow tasks.
   */
  credentials: string;
}

/** @param prefix @default 'retryq' */
export function taskQueues(prefix = 'retryq'): TaskQueues {
  return {
    workflows: `${prefix}.workflows`,
    actions: (credential) => `${prefix}.actions.${credential}`,
    inspect: (credential) => `${prefix}.inspect.${credential}`,
    credentials: `${prefix}.credentials`,
  };
}
