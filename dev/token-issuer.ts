/**
 * A token issuer for a locked Temporal cluster the local stack and the tests run: an ES256 key (the algorithms
 * Temporal's default JWT claim mapper takes are RS256 and ES256), its JWKS served on loopback for the cluster's
 * `jwtKeyProvider`, and signed tokens carrying Temporal's `permissions` claim (`<namespace>:<read|write|admin>`,
 * `temporal-system:admin` for the whole cluster). Temporal's mapper checks the signature, `exp` and `aud`, never `iss`:
 * each token names the audience the cluster is configured with.
 *
 * Production uses its identity provider's JWKS instead (docs/cluster.md). A full OIDC provider for people signing in
 * comes with the authenticated-APIs work; this one only mints tokens for services and tests.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type net from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';

/** The audience a cluster of this project requires (config.yaml's TEMPORAL_AUTH_AUDIENCE): tokens for other services do not pass. */
export const TEMPORAL_AUDIENCE = 'temporal-frontend';

export interface TokenIssuer {
  /** The JWKS the cluster fetches its keys from. */
  readonly jwksUrl: string;
  readonly issuer: string;
  /**
   * A token for `subject` with these permissions, valid for `expiresIn` (a jose time span, e.g. '1h', '30s', or the
   * expiry as seconds since the epoch: one in the past makes an expired token).
   */
  token(subject: string, permissions: readonly string[], options?: { expiresIn?: string | number; audience?: string; kid?: string }): Promise<string>;
  stop(): Promise<void>;
}

export async function startTokenIssuer(): Promise<TokenIssuer> {
  const kid = `hold-sweeper-${randomUUID().slice(0, 8)}`;
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' };
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/.well-known/jwks.json') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ keys: [jwk] }));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const issuer = `http://127.0.0.1:${port}`;
  return {
    jwksUrl: `${issuer}/.well-known/jwks.json`,
    issuer,
    token(subject, permissions, options = {}) {
      return new SignJWT({ permissions: [...permissions] })
        .setProtectedHeader({ alg: 'ES256', kid: options.kid ?? kid })
        .setIssuer(issuer)
        .setAudience(options.audience ?? TEMPORAL_AUDIENCE)
        .setSubject(subject)
        .setIssuedAt()
        .setExpirationTime(options.expiresIn ?? '1h')
        .sign(privateKey);
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
