/**
 * A full OpenID Connect provider on loopback (the `oidc-provider` package: discovery, JWKS, the token endpoint) for
 * the admin API in dev and in the tests, so neither needs anything external. Operators and services are its clients:
 * each gets access tokens by the client-credentials grant, as JWTs for one service's audience (a region's admin API,
 * the codec endpoint: each its own resource, RFC 8707), with the client's id as `sub` and its roles in the `roles`
 * claim.
 *
 * Its signing key is generated here, so a test can also mint what a real provider would refuse to: an expired token,
 * one for another audience (`mint`), and one signed by a key the provider never published (`mintForeign`).
 * Production points API_OIDC_ISSUER at the organisation's provider instead (docs/api.md).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import https from 'node:https';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import Provider, { type ClientMetadata } from 'oidc-provider';
import { adminAudience, CODEC_AUDIENCE } from '../src/contracts/identity.js';
import { REGIONS } from '../src/contracts/regions.js';
import { freePort } from './embedded-postgres.js';

/** The audiences it issues tokens for: each region's admin API and the codec endpoint. */
const AUDIENCES: readonly string[] = [...REGIONS.map(adminAudience), CODEC_AUDIENCE];
/** The resource indicator (RFC 8707) a token for `audience` is asked for with. */
const resourceOf = (audience: string) => `urn:hold-sweeper:${audience}`;

interface OidcClientSpec {
  clientId: string;
  /** Roles as the claim carries them: `operator` (every region) or `us:operator` (one). */
  roles: readonly string[];
}

/**
 * A browser application signing people in (the Web UI server): the authorization-code flow, with the provider's own
 * login and consent pages (any account name signs in; its roles are `accounts`'). Its access tokens are for the codec
 * endpoint's audience, which the Web UI forwards them to.
 */
interface OidcWebClientSpec {
  clientId: string;
  redirectUris: readonly string[];
}

interface DevOidcOptions {
  port?: number;
  webClients?: readonly OidcWebClientSpec[];
  /** People who sign in through a web client, and their roles (anyone else signs in with none). */
  accounts?: Readonly<Record<string, readonly string[]>>;
  /** How long an access token lives (3600 s unless said; `npm start` gives its operators a day). */
  tokenTtlSeconds?: number;
  /**
   * Serve over https with this certificate (an https issuer, as production requires of the APIs'): a process verifying
   * its tokens trusts the certificate's CA (NODE_EXTRA_CA_CERTS); this process mints its tokens (`mint`).
   */
  tls?: { cert: Buffer; key: Buffer };
}

interface MintOptions {
  subject: string;
  roles: readonly string[];
  /** Seconds since the epoch, or a jose span ('1h'); one in the past makes an expired token. */
  expiresAt?: number | string;
  /** Seconds since the epoch; now unless given, none at all when null. */
  issuedAt?: number | null;
  audience: string;
}

export interface DevOidcProvider {
  readonly issuer: string;
  /** Each client's secret (generated at start). */
  readonly secrets: ReadonlyMap<string, string>;
  /** An access token for the client and `audience`, by the client-credentials grant at the token endpoint. */
  token(clientId: string, audience: string): Promise<string>;
  /** A token signed with the provider's own key, claims as given (for tests of what the API must refuse). */
  mint(options: MintOptions): Promise<string>;
  /** The same, signed by a key the provider never published. */
  mintForeign(options: MintOptions): Promise<string>;
  stop(): Promise<void>;
}

type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

async function signingKey(): Promise<{ privateJwk: JWK; key: PrivateKey; kid: string }> {
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  const kid = randomUUID();
  return { privateJwk: { ...(await exportJWK(privateKey)), kid, alg: 'ES256', use: 'sig' }, key: privateKey, kid };
}

export async function startDevOidcProvider(
  clients: readonly OidcClientSpec[],
  options: DevOidcOptions = {},
): Promise<DevOidcProvider> {
  const { port, webClients = [], accounts = {}, tokenTtlSeconds = 3600 } = options;
  const listenPort = port ?? (await freePort());
  const issuer = `${options.tls ? 'https' : 'http'}://127.0.0.1:${listenPort}`;
  const own = await signingKey();
  const foreign = await signingKey();
  const secrets = new Map([...clients, ...webClients].map((c) => [c.clientId, randomBytes(24).toString('base64url')]));
  const rolesOf = new Map(clients.map((c) => [c.clientId, [...c.roles]]));
  const provider = new Provider(issuer, {
    clients: clients
      .map((c): ClientMetadata => ({
        client_id: c.clientId,
        client_secret: secrets.get(c.clientId)!,
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        token_endpoint_auth_method: 'client_secret_basic',
        id_token_signed_response_alg: 'ES256',
      }))
      .concat(
        webClients.map((c): ClientMetadata => ({
          client_id: c.clientId,
          client_secret: secrets.get(c.clientId)!,
          grant_types: ['authorization_code', 'refresh_token'],
          redirect_uris: [...c.redirectUris],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_basic',
          id_token_signed_response_alg: 'ES256',
        })),
      ),
    findAccount: (_ctx, accountId) => ({
      accountId,
      claims: () => ({ sub: accountId, email: `${accountId}@hold-sweeper.invalid`, name: accountId }),
    }),
    claims: { openid: ['sub'], email: ['email'], profile: ['name'] },
    jwks: { keys: [own.privateJwk] },
    ttl: { ClientCredentials: tokenTtlSeconds },
    features: {
      // Its own login and consent pages, for web clients (the tests' browser fills them).
      devInteractions: { enabled: webClients.length > 0 },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // A browser's sign-in asks for no resource: its token is for the codec endpoint the Web UI forwards it to.
        defaultResource: () => resourceOf(CODEC_AUDIENCE),
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => {
          const audience = AUDIENCES.find((a) => resourceOf(a) === resource);
          if (!audience) throw new Error(`unknown resource ${resource}`);
          return {
            scope: 'api',
            audience,
            accessTokenTTL: tokenTtlSeconds,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'ES256' } },
          };
        },
      },
    },
    // The client's roles, as an organisation's provider puts its groups or app roles in a claim.
    extraTokenClaims: (_ctx, token) => ({
      roles:
        'accountId' in token && token.accountId
          ? [...(accounts[token.accountId as string] ?? [])]
          : (rolesOf.get(token.clientId ?? '') ?? []),
    }),
  });
  const server: Server = await new Promise((resolve) => {
    const callback = provider.callback();
    const s = options.tls
      ? https
          .createServer(options.tls, (req, res) => void callback(req, res))
          .listen(listenPort, '127.0.0.1', () => resolve(s))
      : provider.listen(listenPort, '127.0.0.1', () => resolve(s));
  });

  const mintWith = (key: PrivateKey, kid: string) => async (o: MintOptions) => {
    const jwt = new SignJWT({ roles: [...o.roles] })
      .setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' })
      .setIssuer(issuer)
      .setSubject(o.subject)
      .setAudience(o.audience)
      .setJti(randomUUID());
    if (o.issuedAt !== null) jwt.setIssuedAt(o.issuedAt);
    return jwt.setExpirationTime(o.expiresAt ?? '1h').sign(key);
  };

  return {
    issuer,
    secrets,
    async token(clientId, audience) {
      const secret = secrets.get(clientId);
      if (!secret) throw new Error(`no client ${clientId}`);
      const response = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'api', resource: resourceOf(audience) }),
      });
      const body = (await response.json()) as { access_token?: string; error?: string; error_description?: string };
      if (!response.ok || !body.access_token)
        throw new Error(`token for ${clientId}: ${body.error}: ${body.error_description}`);
      return body.access_token;
    },
    mint: mintWith(own.key, own.kid),
    mintForeign: mintWith(foreign.key, own.kid),
    async stop() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
