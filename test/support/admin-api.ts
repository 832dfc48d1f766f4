/** Calls of the admin API's verbs as the tests make them (in-process, and against the locked cluster). */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { expect } from 'vitest';
import { jsonSchema } from '../../src/doors.js';
import type { AdminVerb } from '../../src/operations/admin-verbs.js';

const REPO = path.resolve(import.meta.dirname, '../..');

/** A request a verb accepts: placeholders for its path, its required fields filled by type. */
export function requestFor(verb: AdminVerb): { url: string; init: RequestInit } {
  const url = verb.path.replace(/:([A-Za-z]+)/g, (_, name: string) => `missing_${name}`);
  const body = Object.fromEntries(
    verb.required.map((field) => {
      const { type, enum: enums } = jsonSchema(verb.fields[field]!);
      return [
        field,
        enums
          ? enums[0]
          : type === 'integer' || type === 'number'
            ? 1
            : type === 'boolean'
              ? true
              : `placeholder ${field}`,
      ];
    }),
  );
  if (verb.method === 'GET')
    return { url: `${url}?${new URLSearchParams(body as Record<string, string>)}`, init: { method: 'GET' } };
  return { url, init: { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } };
}

/** `npm run api` as its own process with `env` (its region's, the API_* settings): once it says it listens. */
export async function startApiProcess(env: NodeJS.ProcessEnv): Promise<{ output(): string; stop(): void }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO, 'src/bin/api.ts')], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  try {
    await expect.poll(() => output, { timeout: 60_000 }).toContain('"msg":"admin API listening"');
  } catch (err) {
    child.kill('SIGTERM');
    throw err;
  }
  return { output: () => output, stop: () => void child.kill('SIGTERM') };
}
