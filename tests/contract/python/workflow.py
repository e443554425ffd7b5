"""Floe's workflow through a client that openapi-python-client generated from
openapi/openapi.json (package `floe_client`, on PYTHONPATH), in typed calls:
a repository on the local S3 store, a deployment, a policy attached to it, a
snapshot, a clone from `__latest_success__`, a restore drill, a 409 and a 400 read through the
client's error type, then both deployments shut down and deleted.

Run by tests/tests/contract.rs with FLOE_API, FLOE_TOKEN and the local S3
store's S3_ENDPOINT, S3_BUCKET, S3_ACCESS_KEY and S3_SECRET_KEY.
"""

import json
import os
import sys
import time

from floe_client import AuthenticatedClient
from floe_client.api.deployments import (
    clone_deployment,
    list_deployment_drills,
    start_deployment_drill,
    create_deployment,
    delete_deployment,
    get_deployment,
    proxy_elasticsearch_get,
    shutdown_deployment,
    take_deployment_snapshot,
    update_deployment,
)
from floe_client.api.snapshot_policies import create_snapshot_policy
from floe_client.api.snapshot_repositories import put_snapshot_repository
from floe_client.models import (
    CloneRequest,
    DrillList,
    DrillQuery,
    DrillRequest,
    DrillStatus,
    DrillView,
    DeploymentSpec,
    DeploymentStatus,
    DeploymentView,
    ErrorBody,
    PolicySpec,
    PolicyView,
    RepositoryRequestType0,
    RepositoryView,
    SnapshotRequest,
    SnapshotState,
    SnapshotView,
)
from floe_client.types import UNSET

API = os.environ["FLOE_API"]
client = AuthenticatedClient(
    base_url=API, token=os.environ["FLOE_TOKEN"], raise_on_unexpected_status=True
)


def expect(response, status, kind):
    """The typed body of a response with `status`, or a failure that shows it."""
    if response.status_code != status or not isinstance(response.parsed, kind):
        sys.exit(
            f"expected {status} {kind.__name__}, got {response.status_code}: "
            f"{response.content[:2000]!r}"
        )
    return response.parsed


def wait_for(deployment_id, status):
    """Polls until the deployment has `status` and no pending plan."""
    for _ in range(600):
        view = expect(get_deployment.sync_detailed(deployment_id, client=client), 200, DeploymentView)
        pending = view.plans.pending
        if view.status == status and (pending is None or pending is UNSET):
            return view
        if view.status == DeploymentStatus.FAILED:
            sys.exit(f"deployment {deployment_id} failed: {view.to_dict()}")
        time.sleep(0.2)
    sys.exit(f"deployment {deployment_id} never became {status}")


def spec(name, policies=()):
    return DeploymentSpec.from_dict(
        {
            "name": name,
            "version": "8.15.3",
            "node_groups": [
                {
                    "id": "hot",
                    "roles": ["master", "data_hot", "data_content", "ingest"],
                    "instance_type": "m6g.xlarge",
                    "count": 1,
                    "zone_count": 1,
                    "storage": {"size_gb": 50},
                }
            ],
            "snapshot": {"repository": "contract-py", "policies": list(policies)},
        }
    )


# A repository on the S3-compatible store that floe-local serves.
repository = RepositoryRequestType0.from_dict(
    {
        "type": "s3",
        "settings": {
            "bucket": os.environ["S3_BUCKET"],
            "endpoint": os.environ["S3_ENDPOINT"],
            "protocol": "http",
            "access_key": os.environ["S3_ACCESS_KEY"],
            "secret_key": os.environ["S3_SECRET_KEY"],
        },
    }
)
repo = expect(
    put_snapshot_repository.sync_detailed("contract-py", client=client, body=repository),
    201,
    RepositoryView,
)
assert repo.name == "contract-py", repo

created = create_deployment.sync_detailed(
    client=client, body=spec("contract-py"), idempotency_key="contract-py-1"
)
source = expect(created, 201, DeploymentView)
assert source.status == DeploymentStatus.INITIALIZING, source.status
wait_for(source.id, DeploymentStatus.RUNNING)

# The cluster through the proxy: the generated client encodes the one
# `{path}` parameter whole (`_cluster%2Fhealth`), and it reaches the same
# path a raw request does, with the cluster's own headers passed back.
health = proxy_elasticsearch_get.sync_detailed(
    source.id, "main-elasticsearch", "_cluster/health", client=client
)
assert health.status_code == 200, (health.status_code, health.content[:500])
assert health.headers.get("x-elastic-product") == "Elasticsearch", dict(health.headers)
assert json.loads(health.content)["cluster_name"] == "contract-py", health.content[:500]

policy = expect(
    create_snapshot_policy.sync_detailed(
        client=client,
        body=PolicySpec.from_dict(
            {
                "name": "contract-py-30m",
                "schedule": {"interval": "30m"},
                "snapshot_name": "<floe-{now/d}>",
                "repository": "contract-py",
            }
        ),
    ),
    201,
    PolicyView,
)

# Attach the policy, at the version last read.
current = get_deployment.sync_detailed(source.id, client=client)
version = expect(current, 200, DeploymentView).resource_version
attached = expect(
    update_deployment.sync_detailed(
        source.id,
        client=client,
        body=spec("contract-py", [policy.id]),
        if_match=f'"{version}"',
    ),
    200,
    DeploymentView,
)
assert attached.snapshot.policies == [policy.id], attached.snapshot
wait_for(source.id, DeploymentStatus.RUNNING)

# A manual snapshot. Attaching started the policy's first run, and one
# snapshot runs at a time per repository: while it does, the API answers 409
# snapshots.concurrent_snapshot (read here through the client's error type),
# and a client waits and takes its own.
for _ in range(300):
    taken = take_deployment_snapshot.sync_detailed(
        source.id, client=client, body=SnapshotRequest(), wait_for_completion=True
    )
    if taken.status_code == 409 and isinstance(taken.parsed, ErrorBody):
        assert taken.parsed.errors[0].code == "snapshots.concurrent_snapshot", taken.parsed
        time.sleep(0.2)
        continue
    break
snapshot = expect(taken, 200, SnapshotView)
assert snapshot.state == SnapshotState.SUCCESS, snapshot.state

clone = expect(
    clone_deployment.sync_detailed(
        source.id,
        client=client,
        body=CloneRequest(name="contract-py-clone", snapshot_name="__latest_success__"),
    ),
    201,
    DeploymentView,
)
wait_for(clone.id, DeploymentStatus.RUNNING)

# A restore drill of the source's latest snapshot, with a query check,
# followed to its verdict through the typed list.
drill = expect(
    start_deployment_drill.sync_detailed(
        source.id,
        client=client,
        body=DrillRequest(queries=[DrillQuery(index="*", min_hits=0)]),
    ),
    202,
    DrillView,
)
assert drill.status == DrillStatus.RUNNING, drill
for _ in range(600):
    drills = expect(list_deployment_drills.sync_detailed(source.id, client=client), 200, DrillList)
    ended = next(d for d in drills.drills if d.id == drill.id)
    if ended.status != DrillStatus.RUNNING:
        break
    time.sleep(0.2)
assert ended.status == DrillStatus.PASSED, ended.to_dict()
assert ended.snapshot == snapshot.snapshot, ended.to_dict()
print("drill:", ended.status, ended.recovery_time.total_millis, "ms")

# A 409 through the client's error type: a running deployment is not deleted.
conflict = expect(delete_deployment.sync_detailed(source.id, client=client), 409, ErrorBody)
assert conflict.errors[0].code, conflict
print("409:", conflict.errors[0].code, conflict.errors[0].message)

# A 400: an instance type that is not in the catalog, the field named.
bad = spec("contract-py-bad")
bad.node_groups[0].instance_type = "m6g.huge"
invalid = expect(create_deployment.sync_detailed(client=client, body=bad), 400, ErrorBody)
item = invalid.errors[0]
assert item.code == "validation.instance_type", item
assert item.fields == ["node_groups[0].instance_type"], item
print("400:", item.code, item.fields)

for deployment_id in (clone.id, source.id):
    expect(shutdown_deployment.sync_detailed(deployment_id, client=client), 202, DeploymentView)
    wait_for(deployment_id, DeploymentStatus.STOPPED)
    # A delete is a plan (202): the record goes when it has removed what the
    # deployment held outside it.
    deleting = expect(delete_deployment.sync_detailed(deployment_id, client=client), 202, DeploymentView)
    assert deleting.status == DeploymentStatus.STOPPING, deleting
    for _ in range(600):
        gone = get_deployment.sync_detailed(deployment_id, client=client)
        if gone.status_code == 404:
            break
        time.sleep(0.2)
    assert expect(gone, 404, ErrorBody).errors[0].code == "deployments.deployment_not_found", gone

print("the Python client drove the whole workflow")
