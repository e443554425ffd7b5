// Floe's workflow through a TypeScript client: types generated from
// openapi/openapi.json by openapi-typescript (generated/floe.d.ts), calls by
// openapi-fetch, type-checked by tsc before it runs. A repository on the local
// S3 store, a deployment, a policy attached, a snapshot, a clone from
// `__latest_success__`, a restore drill, a 409 and a 400 read through the client's error type,
// then both deployments shut down and deleted.
//
// Run by tests/tests/contract.rs with FLOE_API, FLOE_TOKEN and the local S3
// store's S3_ENDPOINT, S3_BUCKET, S3_ACCESS_KEY and S3_SECRET_KEY.

import createClient from "openapi-fetch";
import type { components, paths } from "./generated/floe.js";

type DeploymentSpec = components["schemas"]["DeploymentSpec"];
type DeploymentStatus = components["schemas"]["DeploymentStatus"];
type DeploymentView = components["schemas"]["DeploymentView"];
type DeploymentValidation = components["schemas"]["DeploymentValidation"];
type ErrorBody = components["schemas"]["ErrorBody"];

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
}

const client = createClient<paths>({
  baseUrl: env("FLOE_API"),
  headers: { Authorization: `Bearer ${env("FLOE_TOKEN")}` },
});

/** The typed body of an answer with `status`, or a failure that shows it. */
function expect<T>(result: { data?: T; error?: unknown; response: Response }, status: number): T {
  if (result.response.status !== status || result.data === undefined) {
    throw new Error(`expected ${status}, got ${result.response.status}: ${JSON.stringify(result.error)}`);
  }
  return result.data;
}

/** The error body of an answer with `status`. */
function expectError(result: { error?: ErrorBody; response: Response }, status: number): ErrorBody {
  if (result.response.status !== status || result.error === undefined) {
    throw new Error(`expected error ${status}, got ${result.response.status}`);
  }
  return result.error;
}

/** A create's or update's answer as the view it is: with `validate_only`
 * the same operations answer a `DeploymentValidation` instead, so the typed
 * body is a union that a client narrows. */
function view(d: DeploymentView | DeploymentValidation): DeploymentView {
  if ("outcome" in d) throw new Error(`expected a deployment, got a validation: ${JSON.stringify(d)}`);
  return d;
}

function assert(ok: boolean, what: string): void {
  if (!ok) throw new Error(what);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(id: string, status: DeploymentStatus): Promise<DeploymentView> {
  for (let i = 0; i < 600; i++) {
    const view = expect(await client.GET("/api/v1/deployments/{id}", { params: { path: { id } } }), 200);
    if (view.status === status && !view.plans.pending) return view;
    if (view.status === "failed") throw new Error(`deployment ${id} failed: ${JSON.stringify(view)}`);
    await sleep(200);
  }
  throw new Error(`deployment ${id} never became ${status}`);
}

/** Polls until the deployment is gone: its delete plan succeeded. */
async function waitGone(id: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const got = await client.GET("/api/v1/deployments/{id}", { params: { path: { id } } });
    if (got.response.status === 404) {
      assert(got.error?.errors[0]?.code === "deployments.deployment_not_found", JSON.stringify(got.error));
      return;
    }
    await sleep(200);
  }
  throw new Error(`deployment ${id} was never deleted`);
}

function spec(name: string, policies: string[] = []): DeploymentSpec {
  return {
    name,
    version: "8.15.3",
    node_groups: [
      {
        id: "hot",
        roles: ["master", "data_hot", "data_content", "ingest"],
        instance_type: "m6g.xlarge",
        count: 1,
        zone_count: 1,
        storage: { size_gb: 50 },
      },
    ],
    snapshot: { repository: "contract-ts", policies },
  };
}

async function main(): Promise<void> {
  const repo = expect(
    await client.PUT("/api/v1/platform/configuration/snapshots/repositories/{name}", {
      params: { path: { name: "contract-ts" } },
      body: {
        type: "s3",
        settings: {
          bucket: env("S3_BUCKET"),
          endpoint: env("S3_ENDPOINT"),
          protocol: "http",
          access_key: env("S3_ACCESS_KEY"),
          secret_key: env("S3_SECRET_KEY"),
        },
      },
    }),
    201,
  );
  assert(repo.name === "contract-ts", `repository ${repo.name}`);

  const source = view(
    expect(
      await client.POST("/api/v1/deployments", {
        params: { header: { "Idempotency-Key": "contract-ts-1" } },
        body: spec("contract-ts"),
      }),
      201,
    ),
  );
  assert(source.status === "initializing", `status ${source.status}`);
  await waitFor(source.id, "running");

  // The cluster through the proxy: openapi-fetch encodes the one `{path}`
  // parameter whole (`_cluster%2Fhealth`), and it reaches the same path a
  // raw request does, with the cluster's own headers passed back.
  const health = await client.GET("/api/v1/deployments/{id}/elasticsearch/{ref_id}/proxy/{path}", {
    params: { path: { id: source.id, ref_id: "main-elasticsearch", path: "_cluster/health" } },
  });
  assert(health.response.status === 200, `proxy _cluster/health: ${health.response.status}`);
  assert(
    health.response.headers.get("x-elastic-product") === "Elasticsearch",
    "the proxy passes X-Elastic-Product back",
  );
  const cluster = health.data as { cluster_name?: string } | undefined;
  assert(cluster?.cluster_name === "contract-ts", `proxy answer ${JSON.stringify(health.data)}`);

  const policy = expect(
    await client.POST("/api/v1/snapshot-policies", {
      body: {
        name: "contract-ts-30m",
        schedule: { interval: "30m" },
        snapshot_name: "<floe-{now/d}>",
        repository: "contract-ts",
      },
    }),
    201,
  );

  const current = expect(await client.GET("/api/v1/deployments/{id}", { params: { path: { id: source.id } } }), 200);
  const attached = view(
    expect(
      await client.PUT("/api/v1/deployments/{id}", {
        params: { path: { id: source.id }, header: { "If-Match": `"${current.resource_version}"` } },
        body: spec("contract-ts", [policy.id]),
      }),
      200,
    ),
  );
  assert(attached.snapshot?.policies?.[0] === policy.id, "the policy is attached");
  await waitFor(source.id, "running");

  // A manual snapshot. Attaching started the policy's first run, and one
  // snapshot runs at a time per repository: while it does, the API answers
  // 409 snapshots.concurrent_snapshot (read through the client's error type),
  // and a client waits and takes its own.
  let snapshot: components["schemas"]["SnapshotView"] | undefined;
  for (let i = 0; i < 300 && snapshot === undefined; i++) {
    const taken = await client.POST("/api/v1/deployments/{id}/snapshots", {
      params: { path: { id: source.id }, query: { wait_for_completion: true } },
      body: {},
    });
    if (taken.response.status === 409) {
      assert(taken.error?.errors[0]?.code === "snapshots.concurrent_snapshot", JSON.stringify(taken.error));
      await sleep(200);
      continue;
    }
    snapshot = expect(taken, 200);
  }
  assert(snapshot?.state === "SUCCESS", `snapshot ${snapshot?.state}`);

  const clone = expect(
    await client.POST("/api/v1/deployments/{id}/_clone", {
      params: { path: { id: source.id } },
      body: { name: "contract-ts-clone", snapshot_name: "__latest_success__" },
    }),
    201,
  );
  await waitFor(clone.id, "running");

  // A restore drill of the source's latest snapshot, with a query check,
  // followed to its verdict through the typed list.
  const drill = expect(
    await client.POST("/api/v1/deployments/{id}/_drill", {
      params: { path: { id: source.id } },
      body: { queries: [{ index: "*", min_hits: 0 }] },
    }),
    202,
  );
  assert(drill.status === "running", JSON.stringify(drill));
  let ended = drill;
  for (let i = 0; i < 600 && ended.status === "running"; i++) {
    await sleep(200);
    const drills = expect(
      await client.GET("/api/v1/deployments/{id}/drills", { params: { path: { id: source.id } } }),
      200,
    );
    ended = drills.drills.find((d) => d.id === drill.id) ?? ended;
  }
  assert(ended.status === "passed", JSON.stringify(ended));

  // A 409 through the client's error type: a running deployment is not deleted.
  const conflict = expectError(
    await client.DELETE("/api/v1/deployments/{id}", { params: { path: { id: source.id } } }),
    409,
  );
  assert(conflict.errors[0]?.code === "deployments.deployment_not_stopped", JSON.stringify(conflict));

  // A 400: an instance type not in the catalog, with the field named.
  const bad = spec("contract-ts-bad");
  const group = bad.node_groups[0];
  if (group) group.instance_type = "m6g.huge";
  const invalid = expectError(await client.POST("/api/v1/deployments", { body: bad }), 400);
  assert(invalid.errors[0]?.code === "validation.instance_type", JSON.stringify(invalid));
  assert(invalid.errors[0]?.fields?.[0] === "node_groups[0].instance_type", JSON.stringify(invalid));
  console.log("409:", conflict.errors[0]?.code, "400:", invalid.errors[0]?.code, invalid.errors[0]?.fields);

  for (const id of [clone.id, source.id]) {
    expect(await client.POST("/api/v1/deployments/{id}/_shutdown", { params: { path: { id } } }), 202);
    await waitFor(id, "stopped");
    // A delete is a plan (202): the record goes when it has removed what
    // the deployment held outside it.
    const deleting = expect(await client.DELETE("/api/v1/deployments/{id}", { params: { path: { id } } }), 202);
    assert(deleting.status === "stopping", JSON.stringify(deleting));
    await waitGone(id);
  }
  console.log("the TypeScript client drove the whole workflow");
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
