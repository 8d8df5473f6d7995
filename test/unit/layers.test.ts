/**
 * The layers of src/, drawn under the room picture in docs/development.md: every room has one, ESLint enforces the
 * same ones (`layers` in eslint.config.mjs), and no import in src/ runs up them or round in a cycle. The imports are
 * read from the sources themselves (TypeScript's own import scanner), type-only imports and re-exports included.
 */
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const read = (p: string) => readFile(path.join(root, p), 'utf8');

interface Import {
  importer: string;
  imported: string;
}
const show = (i: Import) => `${i.importer} -> ${i.imported}`;

/** The layers under the room picture, top first: a numbered line starts a layer, an indented line continues it. */
function drawnLayers(page: string): string[][] {
  const picture = /```text\n([\s\S]*?)```/.exec(page)?.[1] ?? '';
  const at = picture.search(/^layers of src\//m);
  expect(at, 'the room picture draws the layers of src/').toBeGreaterThan(0);
  const layers: string[][] = [];
  for (const line of picture.slice(at).split('\n').slice(1)) {
    const numbered = /^\s+(\d+)\s+(.*)$/.exec(line);
    const rooms = (numbered?.[2] ?? line).trim().split(/\s+/).filter(Boolean);
    if (numbered) {
      expect(Number(numbered[1]), `layer ${numbered[1]} follows layer ${layers.length}`).toBe(layers.length + 1);
      layers.push(rooms);
    } else if (rooms.length > 0) layers.at(-1)?.push(...rooms);
  }
  return layers;
}

/** The room of a module of src/: its top folder (`src/dev/`) or, at the top, the file itself (`src/cli.ts`). */
function roomOf(file: string): string {
  const [src, first, ...rest] = file.split('/');
  return rest.length > 0 ? `${src}/${first}/` : file;
}

/** Every import between modules of src/, from the sources. */
async function importsOfSrc(): Promise<Import[]> {
  const files = (await readdir(path.join(root, 'src'), { recursive: true }))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `src/${f.split(path.sep).join('/')}`);
  const imports: Import[] = [];
  for (const importer of files) {
    const scanned = ts.preProcessFile(await read(importer), true, true).importedFiles;
    for (const { fileName } of scanned.filter((f) => f.fileName.startsWith('.'))) {
      const imported = path.posix.join(path.posix.dirname(importer), fileName).replace(/\.js$/, '.ts');
      if (imported.startsWith('src/')) imports.push({ importer, imported });
    }
  }
  return imports;
}

/** The imports that point from a room to a room in a layer above it. */
function upward(imports: readonly Import[], layers: readonly (readonly string[])[]): Import[] {
  const layerOf = (file: string) => {
    const at = layers.findIndex((layer) => layer.includes(roomOf(file)));
    expect(at, `${roomOf(file)} has a layer`).toBeGreaterThanOrEqual(0);
    return at;
  };
  return imports.filter((i) => layerOf(i.imported) < layerOf(i.importer));
}

/** One import cycle among the modules, if there is one (depth-first search). */
function cycleIn(imports: readonly Import[]): string[] | undefined {
  const next = new Map<string, string[]>();
  for (const i of imports) next.set(i.importer, [...(next.get(i.importer) ?? []), i.imported]);
  const done = new Set<string>();
  const trail: string[] = [];
  const visit = (file: string): string[] | undefined => {
    if (trail.includes(file)) return [...trail.slice(trail.indexOf(file)), file];
    if (done.has(file)) return undefined;
    trail.push(file);
    for (const imported of next.get(file) ?? []) {
      const cycle = visit(imported);
      if (cycle) return cycle;
    }
    trail.pop();
    done.add(file);
    return undefined;
  };
  for (const file of next.keys()) {
    const cycle = visit(file);
    if (cycle) return cycle;
  }
  return undefined;
}

/** What eslint.config.mjs enforces. */
async function eslintLayers(): Promise<string[][]> {
  const config = path.join(root, 'eslint.config.mjs');
  return ((await import(config)) as { layers: string[][] }).layers;
}

describe('the layers of src/', () => {
  it('give every room of src/ exactly one layer, and name no room that is not there', async () => {
    const layers = drawnLayers(await read('docs/development.md'));
    const rooms = (await readdir(path.join(root, 'src'), { withFileTypes: true })).map(
      (e) => `src/${e.name}${e.isDirectory() ? '/' : ''}`,
    );
    expect(layers.flat().toSorted()).toEqual(rooms.toSorted());
  });

  it('are the ones ESLint enforces (eslint.config.mjs)', async () => {
    expect(await eslintLayers()).toEqual(drawnLayers(await read('docs/development.md')));
  });

  it('only point down: no import in src/ reaches a layer above its own, type imports included', async () => {
    const imports = await importsOfSrc();
    expect(imports.length).toBeGreaterThan(100);
    expect(upward(imports, drawnLayers(await read('docs/development.md'))).map(show)).toEqual([]);
  });

  it('see an upward import for what it is, and a sideways or downward one as fine', () => {
    const layers = [['src/cli.ts'], ['src/client.ts', 'src/config.ts'], ['src/temporal/'], ['src/errors.ts']];
    const imports = [
      { importer: 'src/temporal/connect.ts', imported: 'src/config.ts' },
      { importer: 'src/client.ts', imported: 'src/config.ts' },
      { importer: 'src/config.ts', imported: 'src/temporal/binaries.ts' },
      { importer: 'src/errors.ts', imported: 'src/cli.ts' },
    ];
    expect(upward(imports, layers).map(show)).toEqual([
      'src/temporal/connect.ts -> src/config.ts',
      'src/errors.ts -> src/cli.ts',
    ]);
  });

  it('hold no import cycle among the modules of src/, type imports included', async () => {
    const imports = await importsOfSrc();
    expect(imports.length).toBeGreaterThan(100);
    expect(cycleIn(imports)).toBeUndefined();
    // The cycle the two intent modules had (intent-status.ts took its Action type from intent.ts) would be seen.
    const cycle = cycleIn([...imports, { importer: 'src/intent-status.ts', imported: 'src/intent.ts' }]);
    expect(new Set(cycle)).toEqual(new Set(['src/intent.ts', 'src/intent-status.ts']));
  });
});
