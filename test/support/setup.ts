// Runs before every workflow and end-to-end test file (vitest `setupFiles`): one quiet Temporal runtime per test
// process. The unit tier starts no Temporal worker or server and goes without it.
import { installRuntime } from '../../src/temporal/runtime.js';

// Intent failures are expected in tests and the SDK logs each at WARN: show only errors unless asked.
const level = process.env['RETRYQ_TEST_LOG_LEVEL']?.toUpperCase();
installRuntime({ level: level === 'DEBUG' || level === 'INFO' || level === 'WARN' ? level : 'ERROR' });
