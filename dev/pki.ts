/**
 * Certificate authorities for a locked Temporal cluster the local stack and the tests run: the client CA, which signs
 * the frontend's server certificate and a client certificate per caller (workers, the receiver, operators, the Web UI
 * server), and the internode CA, which signs only the certificate the cluster's own nodes present to each other
 * (history, matching, the internal-frontend). Two CAs because the internal-frontend trusts whatever internode TLS
 * trusts and makes every caller a system admin: a client certificate must never pass there.
 * Written as PEM files into a directory of their own; the key files are readable by their owner only.
 *
 * Production brings its own CA (docs/cluster.md). The tests keep these files in a temporary directory; `npm run
 * credentials` writes a set for docker-compose.yml's stack.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { generate } from 'selfsigned';

/** The name the cluster's certificates are issued for; clients check it with TEMPORAL_TLS_SERVER_NAME. */
export const CLUSTER_SERVER_NAME = 'temporal.hold.internal';

export interface CertificateFiles {
  cert: string;
  key: string;
}

export interface ClusterPki {
  dir: string;
  /** The client CA's certificate: the root clients trust the frontend by, and the frontend's client CA. */
  ca: string;
  /** The internode CA's certificate: what the nodes trust each other by. It signs no client certificate. */
  internodeCa: string;
  frontend: CertificateFiles;
  internode: CertificateFiles;
  /** A client certificate for `name` (issued once, then the same files). */
  client(name: string): Promise<CertificateFiles>;
  /**
   * A server certificate `<name>.pem` for `hostnames`, signed by the client CA (what clients already trust): a database,
   * an identity provider, the codec endpoint. Server use only, so it passes no client authentication.
   */
  server(name: string, hostnames: readonly string[]): Promise<CertificateFiles>;
}

const ONE_DAY = 86_400_000;

/** Creates the two CAs and the two server certificates in `dir`, valid for `validDays` (7 unless said). */
export async function createClusterPki(dir: string, options: { validDays?: number } = {}): Promise<ClusterPki> {
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  const notBeforeDate = new Date(Date.now() - 60_000);
  const notAfterDate = new Date(Date.now() + (options.validDays ?? 7) * ONE_DAY);
  const authority = (commonName: string) =>
    generate([{ name: 'commonName', value: commonName }], {
      keySize: 2048,
      algorithm: 'sha256',
      notBeforeDate,
      notAfterDate,
      extensions: [
        { name: 'basicConstraints', cA: true, critical: true },
        { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
      ],
    });
  const ca = await authority('hold-sweeper client CA');
  const internodeAuthority = await authority('hold-sweeper internode CA');
  const caFile = path.join(dir, 'ca.pem');
  await fs.writeFile(caFile, ca.cert);
  const internodeCaFile = path.join(dir, 'internode-ca.pem');
  await fs.writeFile(internodeCaFile, internodeAuthority.cert);

  const write = async (name: string, pem: { cert: string; private: string }): Promise<CertificateFiles> => {
    const files = { cert: path.join(dir, `${name}.pem`), key: path.join(dir, `${name}.key`) };
    await fs.writeFile(files.cert, pem.cert);
    await fs.writeFile(files.key, pem.private, { mode: 0o600 });
    return files;
  };
  const issue = async (
    commonName: string,
    usage: { serverAuth?: boolean; clientAuth?: boolean },
    by: { private: string; cert: string } = ca,
    hostnames: readonly string[] = [CLUSTER_SERVER_NAME, 'localhost'],
  ) =>
    generate([{ name: 'commonName', value: commonName }], {
      keySize: 2048,
      algorithm: 'sha256',
      notBeforeDate,
      notAfterDate,
      ca: { key: by.private, cert: by.cert },
      extensions: [
        { name: 'basicConstraints', cA: false },
        { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
        { name: 'extKeyUsage', ...usage },
        {
          name: 'subjectAltName',
          altNames: [...hostnames.map((value) => ({ type: 2 as const, value })), { type: 7 as const, ip: '127.0.0.1' }],
        },
      ],
    });
  // The cluster's own nodes present their certificate both ways (internode TLS is mutual).
  const frontend = await write('frontend', await issue(CLUSTER_SERVER_NAME, { serverAuth: true }));
  const internode = await write(
    'internode',
    await issue(CLUSTER_SERVER_NAME, { serverAuth: true, clientAuth: true }, internodeAuthority),
  );
  const clients = new Map<string, Promise<CertificateFiles>>();
  return {
    dir,
    ca: caFile,
    internodeCa: internodeCaFile,
    frontend,
    internode,
    client(name) {
      if (!/^[a-z0-9-]+$/.test(name))
        throw new Error(`client certificate name ${name}: lower-case letters, digits and -`);
      let files = clients.get(name);
      if (!files) {
        files = issue(`${name}.clients.hold.internal`, { clientAuth: true }).then((pem) =>
          write(`client-${name}`, pem),
        );
        clients.set(name, files);
      }
      return files;
    },
    async server(name, hostnames) {
      return write(name, await issue(hostnames[0]!, { serverAuth: true }, ca, hostnames));
    },
  };
}
