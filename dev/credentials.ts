/**
 * Who may call the locked Temporal of docker-compose.yml, and the files that prove it: one CA, the server's
 * certificates, a client certificate per caller, a signing key's JWKS and a token per caller. `npm run credentials`
 * writes them (dev/bin/credentials.ts); docs/security.md has the same table. Production brings its own CA and
 * identity provider: the callers and their permissions are what carries over.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { createClusterPki } from './pki.js';
import { createTokenSigner } from './token-issuer.js';

export interface Caller {
  /** The client certificate's name (client-<name>.pem) and the token's file (<name>.token). */
  name: string;
  /** Temporal's `permissions` claim; none: a certificate only (the Web UI server forwards each user's own token). */
  permissions: readonly string[];
  who: string;
}

/** Every caller of the compose stack's Temporal and what it may do there. */
export const COMPOSE_CALLERS: readonly Caller[] = [
  {
    name: 'temporal-setup',
    permissions: ['temporal-system:admin'],
    who: 'the one-shot setup: namespaces, search attributes',
  },
  { name: 'worker-us', permissions: ['hold-sweeper-us:write'], who: 'the US worker' },
  { name: 'worker-eu', permissions: ['hold-sweeper-eu:write'], who: 'the EU worker' },
  { name: 'receiver-us', permissions: ['hold-sweeper-us:write'], who: 'the US processor receiver' },
  { name: 'receiver-eu', permissions: ['hold-sweeper-eu:write'], who: 'the EU processor receiver' },
  {
    name: 'api-us',
    permissions: ['hold-sweeper-us:write'],
    who: 'the US admin API (operators’ verbs on their verified behalf)',
  },
  {
    name: 'api-eu',
    permissions: ['hold-sweeper-eu:write'],
    who: 'the EU admin API (operators’ verbs on their verified behalf)',
  },
  {
    name: 'operator',
    permissions: ['hold-sweeper-us:admin', 'hold-sweeper-eu:admin'],
    who: 'an operator: the ops CLI, the temporal CLI',
  },
  {
    name: 'on-call',
    permissions: ['hold-sweeper-us:read', 'hold-sweeper-eu:read'],
    who: 'on-call, reading: the Web UI, the temporal CLI',
  },
  { name: 'web-ui', permissions: [], who: 'the Web UI server (its certificate; each request carries its user token)' },
];

/**
 * Writes the compose stack's credentials into `dir` (which must not hold any yet): pki/ (CA, frontend, internode,
 * client-<caller> certificates), jwks/.well-known/jwks.json (what the stack's jwks service serves),
 * tokens/<caller>.token. Certificates and tokens are valid for `validDays`; the signing key is not kept: run it again
 * to renew everything.
 */
export async function writeComposeCredentials(dir: string, validDays: number): Promise<{ callers: readonly Caller[] }> {
  const existing = await fs.readdir(dir).catch(() => []);
  if (existing.length > 0) throw new Error(`${dir} is not empty: move it away to issue new credentials`);
  const pki = await createClusterPki(path.join(dir, 'pki'), { validDays });
  const signer = await createTokenSigner('hold-sweeper-compose');
  const jwksDir = path.join(dir, 'jwks', '.well-known');
  await fs.mkdir(jwksDir, { recursive: true });
  await fs.writeFile(path.join(jwksDir, 'jwks.json'), JSON.stringify(signer.jwks, null, 2));
  await fs.mkdir(path.join(dir, 'tokens'), { recursive: true, mode: 0o700 });
  for (const caller of COMPOSE_CALLERS) {
    await pki.client(caller.name);
    if (caller.permissions.length === 0) continue;
    const token = await signer.token(`${caller.name}@hold-sweeper`, caller.permissions, { expiresIn: `${validDays}d` });
    await fs.writeFile(path.join(dir, 'tokens', `${caller.name}.token`), token, { mode: 0o600 });
  }
  return { callers: COMPOSE_CALLERS };
}
