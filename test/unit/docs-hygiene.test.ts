/**
 * The docs are a reference: what is true now, how to reproduce it and against what baseline. The history of how it
 * got there lives in git, so no page, source comment, benchmark or test speaks of working sessions or keeps a dated
 * log, the pages stay small enough to read, and what the pages show ships with the package.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const thisFile = path.relative(root, import.meta.filename);

function filesUnder(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name.startsWith('.') ? [] : filesUnder(rel);
    return /\.(ts|mts|mjs|js|md|yaml|yml|json)$/.test(e.name) ? [rel] : [];
  });
}

const pages = ['README.md', ...filesUnder('docs').filter((f) => f.endsWith('.md'))];
const checked = [...pages, 'CHANGELOG.md', ...['src', 'bench', 'scripts', 'test', 'examples'].flatMap(filesUnder)];

/** How a log of working rounds speaks: the word with a number, a bound or an anchor after it, or "earlier"/"that" before it. */
const sessionWords = [
  /\bsessions?\s*(?:[≤<>=]\s*)?\d+/i,
  /\bsession-\d+/i,
  /\b(?:this|that|earlier|previous|last|next|other|every)\s+(?:\w+\s+)?sessions?\b(?!\s*(?:id|token|cookie))/i,
];
/** A date written as a log entry, e.g. "1 December 2026" or "on 2026-12-01". */
const datedLog =
  /\b\d{1,2} (?:January|February|March|April|May|June|July|August|September|October|November|December) 20\d\d\b/;

describe('the docs and the code', () => {
  it('checks the README, every page of docs/, the changelog and the sources', () => {
    expect(pages.length).toBeGreaterThan(10);
    expect(checked).toContain('src/config.ts');
    expect(checked).toContain('bench/scale.ts');
  });

  it('never speak of working sessions ("session N", "an earlier session"): history lives in git', () => {
    const found: string[] = [];
    for (const file of checked) {
      if (file === thisFile) continue;
      readFileSync(path.join(root, file), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (sessionWords.some((w) => w.test(line))) found.push(`${file}:${i + 1}: ${line.trim().slice(0, 120)}`);
        });
    }
    expect(found).toEqual([]);
  });

  it('keep no dated log in the README, docs/ or the changelog', () => {
    const found = [...pages, 'CHANGELOG.md'].filter((f) => datedLog.test(readFileSync(path.join(root, f), 'utf8')));
    expect(found).toEqual([]);
  });

  it('keep the README and docs/ within 200 kB of Markdown, and the benchmarks page within 20 kB', () => {
    const bytes = (f: string) => statSync(path.join(root, f)).size;
    const total = pages.reduce((sum, f) => sum + bytes(f), 0);
    expect(total, `README.md + docs/*.md are ${total} bytes`).toBeLessThanOrEqual(200_000);
    expect(bytes('docs/benchmarks.md')).toBeLessThanOrEqual(20_000);
  });

  it('ship every image a page of docs/ shows (package.json "files")', () => {
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { files: string[] };
    const globToRegExp = (glob: string) =>
      new RegExp(
        '^' +
          glob
            .split('**/')
            .map((part) => part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*'))
            .join('(?:.*/)?') +
          '$',
      );
    const shipped = (file: string) => pkg.files.some((glob) => globToRegExp(glob).test(file));
    const images = pages
      .filter((p) => p.startsWith('docs/'))
      .flatMap((p) =>
        [...readFileSync(path.join(root, p), 'utf8').matchAll(/!\[[^\]]*\]\(([^)\s]+)\)/g)].map((m) =>
          path.posix.join(path.posix.dirname(p), m[1]!),
        ),
      );
    expect(images.length).toBeGreaterThan(0);
    expect(images.filter((img) => !shipped(img))).toEqual([]);
    expect(shipped('docs/not-an-image.txt')).toBe(false);
  });
});
