/**
 * Scripted behaviour: how a rule step (or a burst) turns into what the client sees — a scripted
 * error answer, a delay, a reset, or an executed operation whose answer is lost — and the admission
 * gate's 429.
 */
import type { Answer, Exchange } from './exchange.js';
import type { OperationError } from './operation-store.js';
import { errorAnswer, errorBody, defaultErrorFor, ProviderErrorCode } from './provider-errors.js';
import { admissionRetryAfter, renderRetryAfter } from './retry-after.js';
import type { RetryAfterSpec } from './retry-after.js';
import type { Step } from './scenario.js';
import type { ProviderState } from './state.js';

/** What a scripted error answer is made from (a status step, a burst, a lost answer). */
export interface ScriptedError {
  status: number;
  code?: string | undefined;
  type?: string | undefined;
  message?: string | undefined;
  body?: Record<string, unknown> | undefined;
  retryAfter?: RetryAfterSpec | undefined;
  headers?: Record<string, string> | undefined;
}

/** The answer of a scripted error, and the error to record for the key when the step says so. */
export function scripted(state: ProviderState, step: ScriptedError): { answer: Answer; error: OperationError } {
  const defaults = defaultErrorFor(step.status);
  const code = step.code ?? defaults.code;
  const message = step.message ?? defaults.message;
  const serverNowMs = state.serverNow();
  const headers: Record<string, string> = { ...step.headers };
  if (step.retryAfter !== undefined) headers['Retry-After'] = renderRetryAfter(step.retryAfter, serverNowMs);
  return {
    answer: {
      status: step.status,
      body: step.body ?? errorBody(step.type ?? defaults.type, code, message),
      headers,
      serverNowMs,
    },
    error: { status: step.status, code, message },
  };
}

/** The admission gate's 429 for a wait of `waitMs`, its `Retry-After` agreeing with the `Date` header. */
export function rateLimited(state: ProviderState, limit: number, waitMs: number, what: string): Answer {
  const serverNowMs = state.serverNow();
  const retryAfter = admissionRetryAfter(waitMs, serverNowMs, state.scenario.retryAfterFormat);
  const seconds = Math.max(1, Math.ceil(waitMs / 1_000));
  return {
    ...errorAnswer(
      ProviderErrorCode.rateLimitExceeded,
      `${what} of ${limit} requests per minute exceeded for this API key; retry in ${seconds} s.`,
      { 'Retry-After': retryAfter },
    ),
    serverNowMs,
  };
}

/**
 * Carries out a rule step around `process` (the normal handling, given extra delay):
 * scripted errors and resets skip it; `commitThen` runs it and then loses the answer.
 */
export async function applyStep(
  state: ProviderState,
  exchange: Exchange,
  step: Step,
  process: (delayMs: number) => Promise<Answer>,
  recordFailure: (error: OperationError, answer: Answer) => void,
): Promise<void> {
  if (step === 'normal') {
    state.send(exchange, await process(0));
  } else if ('status' in step) {
    if (step.delayMs !== undefined && !(await state.sleep(step.delayMs))) return;
    const { answer, error } = scripted(state, step);
    if (step.record === true) recordFailure(error, answer);
    state.send(exchange, answer);
  } else if ('reset' in step) {
    state.resetSocket(exchange);
  } else if ('delayMs' in step) {
    state.send(exchange, await process(step.delayMs));
  } else {
    await process(0);
    const lose = step.commitThen;
    if (lose === 'timeout') state.hold(exchange);
    else if (lose === 'reset') state.resetSocket(exchange);
    else state.send(exchange, scripted(state, { status: lose }).answer);
  }
}
