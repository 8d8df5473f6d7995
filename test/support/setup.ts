// Runs before every test file (vitest `setupFiles`): one quiet Temporal runtime per test process.
import { installRuntime } from '../../src/temporal/runtime.js';

installRuntime({ level: process.env['RETRYQ_TEST_LOG_LEVEL'] === 'debug' ? 'DEBUG' : 'WARN' });
