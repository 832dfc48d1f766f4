/**
 * The operators' CLI as a client of the admin API (src/api/admin-server.ts): the region's URL
 * (HOLD_SWEEPER_API_URL_<REGION>, or HOLD_SWEEPER_API_URL for one region; https, or http to loopback) and a token for
 * it (HOLD_SWEEPER_API_TOKEN_<REGION>, or HOLD_SWEEPER_API_TOKEN; each also as a file, ..._FILE_<REGION> and _FILE: an
 * OIDC access token of the API's issuer and audience). Nothing else: no database URL, no payload or merchant-secret
 * key. A private CA for the API's certificate: NODE_EXTRA_CA_CERTS, as for any Node client. The variables are
 * described in src/config-schema.ts (ADMIN_CLIENT_VARIABLES).
 */
import fs from 'node:fs';
import { isRegion, REGIONS, type Region } from '../contracts/regions.js';
import { ConfigError } from '../errors.js';
import { readSettings } from '../config.js';
import { ADMIN_CLIENT_VARIABLES } from '../config-schema.js';
import { pathParams, verbById, type VerbInput } from './admin-verbs.js';

/** How the CLI reaches the verbs: through the admin API, or itself against the region's ledger and Temporal. */
export interface Verbs {
  region: Region;
  /** Through the API: who acts is the token's subject, never an option. */
  remote: boolean;
  /**
   * The verb's answer, unknown until the CLI's printer reads it by the verb's answer schema: it crosses HTTP as JSON,
   * and the CLI reads it as JSON (a Date of the local path prints as the ISO string the API sends).
   */
  call(verbId: string, input: VerbInput): Promise<unknown>;
  close(): Promise<void>;
}

/** The API answered with an error: its name, code and message as the server said them, with its request id. */
export class AdminApiError extends Error {
  override readonly name = 'AdminApiError';
  constructor(
    readonly status: number,
    readonly error: string,
    readonly code: string | undefined,
    /** The server's own message. */
    readonly detail: string,
    readonly requestId: string | undefined,
  ) {
    super(`${error}${code ? `(${code})` : ''}: ${detail}${requestId ? ` [request ${requestId}]` : ''}`);
  }
}

/** The API did not answer: nothing listens at its URL, the network refused, or no answer came in time. */
export class AdminApiUnreachable extends Error {
  override readonly name = 'AdminApiUnreachable';
  constructor(
    readonly url: string,
    why: string,
  ) {
    super(`the admin API at ${url} did not answer (${why}); is HOLD_SWEEPER_API_URL_<REGION> right, and is it up?`);
  }
}

type Env = Readonly<Record<string, string | undefined>>;

/** The admin API of the region asked for, when one is configured; undefined: the CLI runs the verbs itself. */
export function adminApiFromEnv(env: Env, regionOption: string | undefined): Verbs | undefined {
  const configured = REGIONS.filter((r) => env[`HOLD_SWEEPER_API_URL_${r.toUpperCase()}`]);
  const single = env.HOLD_SWEEPER_API_URL;
  if (configured.length === 0 && !single) return undefined;
  let region: Region;
  if (regionOption !== undefined) {
    if (!isRegion(regionOption)) throw new ConfigError('--region', regionOption, REGIONS.join(' or '));
    region = regionOption;
  } else if (configured.length === 1 && !single) {
    region = configured[0]!;
  } else if (single && configured.length === 0) {
    throw new ConfigError('--region', undefined, 'the region HOLD_SWEEPER_API_URL serves (us or eu)');
  } else {
    throw new ConfigError('--region', undefined, `one of ${configured.join(', ')}`);
  }
  const variable = env[`HOLD_SWEEPER_API_URL_${region.toUpperCase()}`]
    ? `HOLD_SWEEPER_API_URL_${region.toUpperCase()}`
    : 'HOLD_SWEEPER_API_URL';
  const base = readSettings(env, { [variable]: ADMIN_CLIENT_VARIABLES.HOLD_SWEEPER_API_URL })[variable];
  if (!base) {
    throw new ConfigError(
      `HOLD_SWEEPER_API_URL_${region.toUpperCase()}`,
      undefined,
      `the admin API of region ${region}`,
    );
  }
  const token = tokenFrom(env, region);
  return {
    region,
    remote: true,
    call: (verbId, input) => callApi(base, token, verbId, input),
    close: async () => undefined,
  };
}

/**
 * The access token for the region's API: HOLD_SWEEPER_API_TOKEN_<R> (or the file HOLD_SWEEPER_API_TOKEN_FILE_<R>
 * names), else HOLD_SWEEPER_API_TOKEN (or _FILE). Each region's API has its own audience: a token is for one region's,
 * unless the identity provider issued it for both.
 */
function tokenFrom(env: Env, region: Region): string {
  const up = region.toUpperCase();
  for (const [variable, fileVariable] of [
    [`HOLD_SWEEPER_API_TOKEN_${up}`, `HOLD_SWEEPER_API_TOKEN_FILE_${up}`],
    ['HOLD_SWEEPER_API_TOKEN', 'HOLD_SWEEPER_API_TOKEN_FILE'],
  ] as const) {
    if (env[variable]) return env[variable]!.trim();
    const file = env[fileVariable];
    if (!file) continue;
    try {
      return fs.readFileSync(file, 'utf8').trim();
    } catch (err) {
      throw new ConfigError(fileVariable, file, `a readable file holding the token (${(err as Error).message})`);
    }
  }
  throw new ConfigError(
    `HOLD_SWEEPER_API_TOKEN_${up}`,
    undefined,
    `an access token for region ${region}'s admin API (or HOLD_SWEEPER_API_TOKEN_FILE_${up}, HOLD_SWEEPER_API_TOKEN)`,
  );
}

async function callApi(base: URL, token: string, verbId: string, input: VerbInput): Promise<unknown> {
  const verb = verbById(verbId);
  const params = new Set(pathParams(verb));
  const path = verb.path.replace(/:([A-Za-z]+)/g, (_, name: string) => encodeURIComponent(String(input[name])));
  const rest = Object.fromEntries(Object.entries(input).filter(([k, v]) => !params.has(k) && v !== undefined));
  const url = new URL(path.replace(/^\//, ''), base.href.endsWith('/') ? base : new URL(`${base.href}/`));
  if (verb.method === 'GET') for (const [k, v] of Object.entries(rest)) url.searchParams.set(k, String(v));
  const response = await fetch(url, {
    method: verb.method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(verb.method === 'POST' ? { 'content-type': 'application/json' } : {}),
    },
    ...(verb.method === 'POST' ? { body: JSON.stringify(rest) } : {}),
    signal: AbortSignal.timeout(10 * 60_000),
  }).catch((err: Error & { cause?: { code?: string; message?: string } }) => {
    // fetch says only "fetch failed"; its cause says why (ECONNREFUSED, a certificate, a timeout). The URL without its
    // query: the path names the verb, and nothing secret is in it (the token travels in a header).
    const why = err.name === 'TimeoutError' ? 'no answer within 10 minutes' : (err.cause?.message ?? err.message);
    throw new AdminApiUnreachable(`${url.origin}${url.pathname}`, why);
  });
  const body = (await response.json().catch(() => undefined)) as Record<string, unknown> | undefined;
  if (!response.ok) {
    throw new AdminApiError(
      response.status,
      String(body?.error ?? `HTTP ${response.status}`),
      body?.code as string | undefined,
      String(body?.message ?? response.statusText),
      (body?.requestId as string | undefined) ?? response.headers.get('x-request-id') ?? undefined,
    );
  }
  // A list comes wrapped ({ items }), so every answer is an object.
  return body && Object.keys(body).length === 1 && Array.isArray(body.items) ? body.items : body;
}
