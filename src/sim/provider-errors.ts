/**
 * The provider's error vocabulary: every error answer is JSON
 * `{"error":{"type","code","message"}}`. This file names the codes, gives each code the one status
 * and type it is answered with ({@link errorAnswer}: the one path every error answer of the
 * simulator takes), and derives defaults for scripted statuses.
 */
import type { Answer } from './exchange.js';

/** Error codes the simulator itself produces. */
export const ProviderErrorCode = {
  invalidApiKey: 'invalid_api_key',
  permissionDenied: 'permission_denied',
  rateLimitExceeded: 'rate_limit_exceeded',
  spendingLimitExceeded: 'spending_limit_exceeded',
  workspaceAllowanceExhausted: 'workspace_allowance_exhausted',
  idempotencyKeyReused: 'idempotency_key_reused',
  idempotencyKeyInUse: 'idempotency_key_in_use',
  invalidIdempotencyKey: 'invalid_idempotency_key',
  operationNotFound: 'operation_not_found',
  notFound: 'not_found',
  methodNotAllowed: 'method_not_allowed',
  invalidJson: 'invalid_json',
  invalidRequest: 'invalid_request',
  requestTooLarge: 'request_too_large',
  invalidScenario: 'invalid_scenario',
  internalError: 'internal_error',
  serviceUnavailable: 'service_unavailable',
} as const;
/** An error code the simulator itself produces. */
export type ProviderErrorCode = (typeof ProviderErrorCode)[keyof typeof ProviderErrorCode];

/** `error.type` values, grouped like common payment/LLM APIs. */
export const ProviderErrorType = {
  authentication: 'authentication_error',
  permission: 'permission_error',
  rateLimit: 'rate_limit_error',
  billing: 'billing_error',
  idempotency: 'idempotency_error',
  invalidRequest: 'invalid_request_error',
  api: 'api_error',
} as const;
/** An `error.type` value. */
export type ProviderErrorType = (typeof ProviderErrorType)[keyof typeof ProviderErrorType];

/** The JSON body of every error answer. */
export interface ErrorBody {
  error: { type: string; code: string; message: string };
}

/** Builds an error body. */
export function errorBody(type: string, code: string, message: string): ErrorBody {
  return { error: { type, code, message } };
}

/** The status and type each code is answered with. */
const answeredAs: Readonly<Record<ProviderErrorCode, { status: number; type: ProviderErrorType }>> = {
  invalid_api_key: { status: 401, type: ProviderErrorType.authentication },
  permission_denied: { status: 403, type: ProviderErrorType.permission },
  rate_limit_exceeded: { status: 429, type: ProviderErrorType.rateLimit },
  spending_limit_exceeded: { status: 402, type: ProviderErrorType.billing },
  workspace_allowance_exhausted: { status: 403, type: ProviderErrorType.billing },
  idempotency_key_reused: { status: 422, type: ProviderErrorType.idempotency },
  idempotency_key_in_use: { status: 409, type: ProviderErrorType.idempotency },
  invalid_idempotency_key: { status: 400, type: ProviderErrorType.invalidRequest },
  operation_not_found: { status: 404, type: ProviderErrorType.invalidRequest },
  not_found: { status: 404, type: ProviderErrorType.invalidRequest },
  method_not_allowed: { status: 405, type: ProviderErrorType.invalidRequest },
  invalid_json: { status: 400, type: ProviderErrorType.invalidRequest },
  invalid_request: { status: 400, type: ProviderErrorType.invalidRequest },
  request_too_large: { status: 413, type: ProviderErrorType.invalidRequest },
  invalid_scenario: { status: 400, type: ProviderErrorType.invalidRequest },
  internal_error: { status: 500, type: ProviderErrorType.api },
  service_unavailable: { status: 503, type: ProviderErrorType.api },
};

/**
 * The answer for one of the simulator's own errors: status and type from the code, the message
 * (what happened and what to do) from the caller.
 */
export function errorAnswer(
  code: ProviderErrorCode,
  message: string,
  headers?: Record<string, string>,
  extra?: Record<string, unknown>,
): Answer {
  const { status, type } = answeredAs[code];
  const body = { error: { type, code, message, ...extra } };
  return headers ? { status, body, headers } : { status, body };
}

const defaultCodes: Readonly<Record<number, string>> = {
  400: 'invalid_request',
  401: 'invalid_api_key',
  402: 'spending_limit_exceeded',
  403: 'permission_denied',
  404: 'not_found',
  405: 'method_not_allowed',
  408: 'request_timeout',
  409: 'conflict',
  413: 'request_too_large',
  422: 'validation_failed',
  429: 'rate_limit_exceeded',
  500: 'internal_error',
  502: 'bad_gateway',
  503: 'service_unavailable',
  504: 'gateway_timeout',
};

/** The default `type` and `code` for a scripted error status. */
export function defaultErrorFor(status: number): { type: ProviderErrorType; code: string; message: string } {
  const code = defaultCodes[status] ?? (status >= 500 ? 'server_error' : 'request_error');
  const own = Object.hasOwn(answeredAs, code) ? answeredAs[code as ProviderErrorCode] : undefined;
  const type = own?.type ?? (status >= 500 ? ProviderErrorType.api : ProviderErrorType.invalidRequest);
  return { type, code, message: `The provider answered ${status} (${code}).` };
}
