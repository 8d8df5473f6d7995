import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { toolsDir, userCacheDir } from '../../../src/temporal/binaries.js';

describe('where retryq keeps the Temporal binaries (one folder per user, whatever the project)', () => {
  it('is $XDG_CACHE_HOME/retryq when XDG_CACHE_HOME is an absolute path', () => {
    expect(toolsDir({ HOME: '/home/ada', XDG_CACHE_HOME: '/var/cache/ada' })).toBe('/var/cache/ada/retryq');
  });

  it('is ~/.cache/retryq without XDG_CACHE_HOME, or with a relative one (the XDG specification ignores it)', () => {
    expect(toolsDir({ HOME: '/home/ada' })).toBe('/home/ada/.cache/retryq');
    expect(userCacheDir({ HOME: '/home/ada', XDG_CACHE_HOME: 'cache' })).toBe('/home/ada/.cache/retryq');
  });

  it('is RETRYQ_TOOLS_DIR when set, resolved against the working directory', () => {
    expect(toolsDir({ HOME: '/home/ada', XDG_CACHE_HOME: '/x', RETRYQ_TOOLS_DIR: '/opt/temporal' })).toBe(
      '/opt/temporal',
    );
    expect(toolsDir({ RETRYQ_TOOLS_DIR: 'tools' })).toBe(path.resolve('tools'));
  });
});
