/**
 * The provider's error vocabulary: every error answer is JSON
 * `{"error":{"type","code","message"}}`; this file names the codes and derives defaults for
 * scripted statuses.
 */

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
  let type: ProviderErrorType;
  if (status === 401) type = ProviderErrorType.authentication;
  else if (status === 402) type = ProviderErrorType.billing;
  else if (status === 403) type = ProviderErrorType.permission;
  else if (status === 429) type = ProviderErrorType.rateLimit;
  else if (status >= 500) type = ProviderErrorType.api;
  else type = ProviderErrorType.invalidRequest;
  return { type, code, message: `The provider answered ${status} (${code}).` };
}
