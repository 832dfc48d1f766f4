/**
 * Tokens for a locked Temporal cluster the local stack and the tests run: an ES256 key (the algorithms Temporal's
 * default JWT claim mapper takes are RS256 and ES256), its JWKS (served on loopback for the tests' cluster, written
 * to a file for docker-compose.yml's), and signed tokens carrying Temporal's `permissions` claim
 * (`<namespace>:<read|write|admin>`, `temporal-system:admin` for the whole cluster) and a subject, which names a
 * service to the cluster's authorizer (serviceSubject). Temporal's mapper checks the
 * signature, `exp` and `aud`, never `iss`: each token names the audience the cluster is configured with.
 *
 * Production uses its identity provider's JWKS instead (docs/cluster.md). A full OIDC provider for people signing in
 * comes with the authenticated-APIs work; this one only mints tokens for services and tests.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type net from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';

/**
 * The audience a cluster of this project requires (config.yaml's TEMPORAL_AUTH_AUDIENCE): tokens for other services do
 * not pass.
 */
export const TEMPORAL_AUDIENCE = 'temporal-frontend';

/**
 * The services that call the cluster, each a caller of deploy/temporal/server/cluster-rights.json. The cluster knows a
 * service by its token's subject (serviceSubject), and allows it that caller's methods only.
 */
export type ServiceCaller = 'worker' | 'receiver' | 'admin-api';

/**
 * A service's token subject: `<service>@<namespace>`. The authorizer reads the part before the @; the namespace after
 * it tells one region's token from another's in the cluster's log (its permissions claim is what grants the namespace).
 */
export const serviceSubject = (service: ServiceCaller, namespace: string): string => `${service}@${namespace}`;

interface TokenOptions {
  /** A jose time span ('1h', '30d'), or the expiry in seconds since the epoch (one in the past: an expired token). */
  expiresIn?: string | number;
  audience?: string;
  kid?: string;
}

interface TokenSigner {
  /** The public half, as the cluster's jwtKeyProvider reads it. */
  readonly jwks: { keys: JWK[] };
  /** A token for `subject` with these permissions (one hour unless said). */
  token(subject: string, permissions: readonly string[], options?: TokenOptions): Promise<string>;
}

export interface TokenIssuer extends TokenSigner {
  /** The JWKS the cluster fetches its keys from. */
  readonly jwksUrl: string;
  stop(): Promise<void>;
}

/**
 * A new signing key and what it signs. `issuer`: the tokens' `iss` (informational: Temporal does not check it);
 * `permissionsClaim`: the claim the permissions go in, the cluster's `permissionsClaimName` (compose's is `groups`, the
 * claim its identity provider puts people's permissions in).
 */
export async function createTokenSigner(
  issuer = 'hold-sweeper-dev',
  permissionsClaim = 'permissions',
): Promise<TokenSigner> {
  const kid = `hold-sweeper-${randomUUID().slice(0, 8)}`;
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' }] };
  return {
    jwks,
    token: (subject, permissions, options = {}) =>
      new SignJWT({ [permissionsClaim]: [...permissions] })
        .setProtectedHeader({ alg: 'ES256', kid: options.kid ?? kid })
        .setIssuer(issuer)
        .setAudience(options.audience ?? TEMPORAL_AUDIENCE)
        .setSubject(subject)
        .setIssuedAt()
        .setExpirationTime(options.expiresIn ?? '1h')
        .sign(privateKey),
  };
}

/** A signer whose JWKS is served at http://127.0.0.1:<port>/.well-known/jwks.json (for a cluster started by a test). */
export async function startTokenIssuer(): Promise<TokenIssuer> {
  let jwks = '';
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/.well-known/jwks.json') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(jwks);
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const issuer = `http://127.0.0.1:${port}`;
  const signer = await createTokenSigner(issuer);
  jwks = JSON.stringify(signer.jwks);
  return {
    ...signer,
    jwksUrl: `${issuer}/.well-known/jwks.json`,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
