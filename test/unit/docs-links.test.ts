/**
 * The README and docs/ travel with the code: every link in them must lead to a file of this repository (and to a
 * heading that exists there), never out of it. Mentions of local servers (`http://localhost:8233`) are not links
 * out: they are where `npm run dev` serves.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const pages = [
  'README.md',
  ...readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The text of a page without fenced code blocks and inline code, where brackets and URLs are not links. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  const withoutCode = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  for (const m of withoutCode.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = (m[1] ?? '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .trim()
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

interface Link {
  page: string;
  target: string;
}

function linksOf(page: string): Link[] {
  const text = prose(readFileSync(path.join(root, page), 'utf8'));
  const links: Link[] = [];
  for (const m of text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g))
    links.push({ page, target: m[1]! });
  for (const m of text.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) links.push({ page, target: m[1]! });
  for (const m of text.matchAll(/<([a-z][a-z0-9+.-]*:[^>\s]+)>/gi)) links.push({ page, target: m[1]! });
  // GitHub turns bare URLs and www. names into links too.
  for (const m of text.matchAll(/(?<![(<\w])(?:[a-z][a-z0-9+.-]*:\/\/|www\.)[^\s)<>]+/gi))
    links.push({ page, target: m[0] });
  return links;
}

const isLocalServer = (target: string) => /^https?:\/\/(localhost|127\.0\.0\.1)(:\d+)?(\/|$)/.test(target);

describe('links in README.md and docs/', () => {
  const all = pages.flatMap(linksOf);

  it('finds the pages and their links', () => {
    expect(pages).toContain('README.md');
    expect(pages).toContain('docs/concepts.md');
    expect(all.filter((l) => l.page === 'README.md').length).toBeGreaterThan(10);
  });

  it('never point outside the repository (local dev servers aside)', () => {
    const outside = all.filter(
      (l) =>
        (/^[a-z][a-z0-9+.-]*:/i.test(l.target) || l.target.startsWith('//') || l.target.startsWith('www.')) &&
        !isLocalServer(l.target),
    );
    expect(outside).toEqual([]);
  });

  it('resolve to a file of the repository and, with a #fragment, to a heading in it', () => {
    const broken: string[] = [];
    for (const { page, target } of all) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//') || target.startsWith('www.')) continue;
      const [file = '', fragment] = target.split('#');
      const resolved = file ? path.resolve(root, path.dirname(page), decodeURIComponent(file)) : path.join(root, page);
      if (path.relative(root, resolved).startsWith('..')) {
        broken.push(`${page}: ${target} leaves the repository`);
        continue;
      }
      if (!existsSync(resolved)) {
        broken.push(`${page}: ${target} → no such file`);
        continue;
      }
      if (fragment !== undefined && statSync(resolved).isFile() && resolved.endsWith('.md')) {
        if (!anchorsOf(readFileSync(resolved, 'utf8')).has(fragment))
          broken.push(`${page}: ${target} → no heading #${fragment} in ${path.relative(root, resolved)}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
