/**
 * Who is calling: an OIDC access token (a JWT) verified against the issuer's published keys (its JWKS, found through
 * its discovery document) for issuer, audience, expiry, age and signature, with a clock tolerance. A token lives a
 * bounded time: issued (`iat`) at most the longest lifetime ago, and valid (`exp`) at most that long after its issue, so
 * a token minted to last for ever, by a misconfigured issuer or with a stolen key, is refused. The roles come from a
 * claim of the token (`roles` unless configured): the identity provider decides who may do what, and the subject it
 * vouches for is the name four eyes compare, never a name the caller types.
 *
 * A role in the claim holds in every region (`operator`) or in one (`us:operator`). Each admin API has its own
 * audience (one per region), so a token minted for one region's API is refused by the other's; the codec endpoint
 * serves every region under one audience, and asks which roles hold in the region of the namespace it encodes for.
 */
import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload } from 'jose';
import { ROLES, type Role } from '../contracts/identity.js';
import { REGIONS, type Region } from '../contracts/regions.js';

export interface Identity {
  /** The token's `sub`, as the issuer vouches for it. */
  subject: string;
  /** Roles held in every region. */
  roles: Role[];
  /** Roles held in one region only (`us:operator`). */
  regional: Partial<Record<Region, Role[]>>;
}

/** The roles `identity` holds in `region`: its roles everywhere and those of that region. */
export function rolesIn(identity: Identity, region: Region): Role[] {
  const held = new Set<Role>([...identity.roles, ...(identity.regional[region] ?? [])]);
  return ROLES.filter((role) => held.has(role));
}

/**
 * A verifier whose callers' roles are asked per Temporal namespace (each namespace is a region's): what the codec
 * endpoint, which serves every region, checks each request by.
 */
export function byNamespace(verifier: TokenVerifier, regions: readonly { namespace: string; region: Region }[]) {
  const regionOf = new Map(regions.map((r) => [r.namespace, r.region]));
  return {
    async authenticate(authorization: string | undefined) {
      const identity = await verifier.verify(authorization);
      return {
        subject: identity.subject,
        rolesIn(namespace: string): Role[] {
          const region = regionOf.get(namespace);
          return region ? rolesIn(identity, region) : [];
        },
      };
    },
  };
}

interface VerifierOptions {
  /** The issuer's URL (its `iss`); `<issuer>/.well-known/openid-configuration` names its JWKS. */
  issuer: string;
  /** The audience this API requires (`aud`): a token minted for another service does not pass. */
  audience: string;
  /** The claim holding the roles (an array of strings, or one space-separated string). */
  rolesClaim: string;
  /** Seconds of clock difference tolerated on `exp`, `nbf` and `iat`. */
  clockToleranceSeconds: number;
  /** The longest lifetime of a token, in seconds: from its `iat` to its `exp`, and from its `iat` to now. */
  maxTokenAgeSeconds: number;
}

/** A call refused before any verb ran: no token, or one that does not verify. Answered 401. */
export class Unauthenticated extends Error {
  override readonly name = 'Unauthenticated';
}

/** A verified caller without a role the verb requires. Answered 403. */
export class Forbidden extends Error {
  override readonly name = 'Forbidden';
}

export interface TokenVerifier {
  verify(authorization: string | undefined): Promise<Identity>;
}

/** Reads the issuer's discovery document once, then verifies tokens against its JWKS (refetched as keys rotate). */
export async function createTokenVerifier(options: VerifierOptions): Promise<TokenVerifier> {
  const discovery = `${options.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
  const response = await fetch(discovery, { signal: AbortSignal.timeout(10_000) });
  if (!response.ok) throw new Error(`the OIDC issuer's discovery document ${discovery} answered ${response.status}`);
  const metadata = (await response.json()) as { issuer?: string; jwks_uri?: string };
  if (metadata.issuer !== options.issuer) {
    throw new Error(
      `the OIDC discovery document at ${discovery} names issuer ${metadata.issuer}, not ${options.issuer}`,
    );
  }
  if (!metadata.jwks_uri) throw new Error(`the OIDC discovery document at ${discovery} names no jwks_uri`);
  const keys = createRemoteJWKSet(new URL(metadata.jwks_uri));
  return {
    async verify(authorization) {
      const token = /^Bearer ([A-Za-z0-9_.~+/=-]+)$/.exec(authorization ?? '')?.[1];
      if (!token) throw new Unauthenticated('a bearer token is required (Authorization: Bearer <token>)');
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, keys, {
          issuer: options.issuer,
          audience: options.audience,
          clockTolerance: options.clockToleranceSeconds,
          requiredClaims: ['sub', 'exp', 'iat'],
          maxTokenAge: options.maxTokenAgeSeconds,
        }));
      } catch (err) {
        throw new Unauthenticated(`the token does not verify: ${describe(err)}`);
      }
      if (payload.exp! - payload.iat! > options.maxTokenAgeSeconds) {
        throw new Unauthenticated(
          `the token does not verify: it is valid for ${payload.exp! - payload.iat!} s, longer than ${options.maxTokenAgeSeconds} s`,
        );
      }
      // An empty subject would make every such caller one person to four eyes and to the audit.
      if (typeof payload.sub !== 'string' || payload.sub.trim() === '')
        throw new Unauthenticated('the token does not verify: its subject (sub) is empty');
      return { subject: payload.sub, ...rolesOf(payload[options.rolesClaim]) };
    },
  };
}

function describe(err: unknown): string {
  if (err instanceof errors.JWTExpired) return err.claim === 'iat' ? 'issued too long ago' : 'expired';
  if (err instanceof errors.JWTClaimValidationFailed)
    return `${err.claim} ${err.reason === 'check_failed' ? 'is not the expected one' : err.reason}`;
  if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWSSignatureVerificationFailed)
    return 'not signed by the issuer';
  if (err instanceof errors.JOSEError) return err.code;
  return 'malformed';
}

/** Known roles from the claim, everywhere and per region; anything else in it grants nothing. */
function rolesOf(claim: unknown): Pick<Identity, 'roles' | 'regional'> {
  const values: unknown[] = Array.isArray(claim) ? claim : typeof claim === 'string' ? claim.split(' ') : [];
  const regional: Identity['regional'] = {};
  for (const region of REGIONS) {
    const here = ROLES.filter((role) => values.includes(`${region}:${role}`));
    if (here.length) regional[region] = here;
  }
  return { roles: ROLES.filter((role) => values.includes(role)), regional };
}
