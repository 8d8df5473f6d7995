// Runs before every test file (vitest `setupFiles`): one quiet Temporal runtime per test process.
import { installRuntime } from '../../src/temporal/runtime.js';

// Intent failures are expected in tests and the SDK logs each at WARN: show only errors unless asked.
const level = process.env['RETRYQ_TEST_LOG_LEVEL']?.toUpperCase();
installRuntime({ level: level === 'DEBUG' || level === 'INFO' || level === 'WARN' ? level : 'ERROR' });
