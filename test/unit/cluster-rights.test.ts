/**
 * deploy/temporal/server/cluster-rights.json is the one table of who may call what on the cluster: docs/security.md
 * prints it, the services' tokens name its callers, and every method it lists is one of Temporal's. The cluster test
 * (test/integration/cluster.test.ts) checks the server enforces it, method by method.
 */
import fs from 'node:fs';
import proto from '@temporalio/proto';
import { expect, it } from 'vitest';
import {
  ANYONE,
  CLUSTER_RIGHTS,
  clusterRightsMatrix,
  SECURITY_DOC,
  withClusterRightsMatrix,
  type RightsService,
} from '../../dev/cluster-rights.js';
import { COMPOSE_CALLERS } from '../../dev/credentials.js';

const PROTO_METHODS: Record<RightsService, string[]> = {
  WorkflowService: Object.keys(
    (proto.temporal.api.workflowservice.v1.WorkflowService as unknown as { methods: object }).methods,
  ),
  OperatorService: Object.keys(
    (proto.temporal.api.operatorservice.v1.OperatorService as unknown as { methods: object }).methods,
  ),
};

it('docs/security.md prints the table as it is (npm run docs:config writes it)', () => {
  const doc = fs.readFileSync(SECURITY_DOC, 'utf8');
  expect(withClusterRightsMatrix(doc)).toBe(doc);
  // A right added to the table is a cell the doc lacks until it is written again.
  const methods = structuredClone(CLUSTER_RIGHTS.methods);
  methods.WorkflowService.UpdateSchedule!.push('worker');
  expect(withClusterRightsMatrix(doc).includes('| WorkflowService.UpdateSchedule |  |  |  | ✓ |  |  |')).toBe(true);
  expect(clusterRightsMatrix({ ...CLUSTER_RIGHTS, methods })).toContain(
    '| WorkflowService.UpdateSchedule | ✓ |  |  | ✓ |  |  |',
  );
});

it('names only callers it describes, and only methods of the services it governs', () => {
  const callers = Object.keys(CLUSTER_RIGHTS.callers);
  for (const service of Object.keys(CLUSTER_RIGHTS.methods) as RightsService[]) {
    expect(PROTO_METHODS[service], service).toEqual(
      expect.arrayContaining(Object.keys(CLUSTER_RIGHTS.methods[service])),
    );
    for (const [method, allowed] of Object.entries(CLUSTER_RIGHTS.methods[service])) {
      for (const caller of allowed) expect(callers, `${service}.${method}`).toContain(caller);
      // Whoever anyone is, nobody else needs naming.
      if (allowed.includes(ANYONE)) expect(allowed, `${service}.${method}`).toEqual([ANYONE]);
    }
  }
  // The deploy step's rights are the operator's, and no service's: schedules and the current build.
  for (const method of ['CreateSchedule', 'UpdateSchedule', 'SetWorkerDeploymentCurrentVersion']) {
    expect(CLUSTER_RIGHTS.methods.WorkflowService[method], method).toEqual(['operator']);
  }
});

it("every service token compose's credentials issue names a caller of the table by its subject", () => {
  const services = COMPOSE_CALLERS.filter((c) => c.permissions.some((p) => p.endsWith(':write')));
  expect(services.map((c) => c.name).sort()).toEqual(
    ['api-eu', 'api-us', 'receiver-eu', 'receiver-us', 'worker-eu', 'worker-us'].sort(),
  );
  for (const caller of services) {
    const [service, namespace] = caller.subject.split('@') as [string, string];
    expect(Object.keys(CLUSTER_RIGHTS.callers), caller.name).toContain(service);
    expect(caller.permissions, caller.name).toEqual([`${namespace}:write`]);
  }
});
