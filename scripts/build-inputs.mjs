// What `npm run build` reads, hashed: when the hash equals the one recorded after the last build, dist/ is current.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const buildStamp = path.join(root, 'node_modules', '.cache', 'retryq', 'build-inputs.sha256');

function* filesBelow(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) yield* filesBelow(p);
    else yield p;
  }
}

export function buildInputsHash() {
  const hash = createHash('sha256');
  const inputs = [...filesBelow(path.join(root, 'src')), 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'];
  for (const f of inputs) {
    const p = path.resolve(root, f);
    hash.update(path.relative(root, p));
    hash.update(readFileSync(p));
  }
  return hash.digest('hex');
}
