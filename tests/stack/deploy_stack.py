"""Deploys infra/template.yaml into a CloudFormation endpoint (moto on
loopback), as `sam package` and `sam deploy` would, and prints the stack's
outputs and resources as JSON on stdout.

What it does, in order, every step against FLOE_TEST_AWS_ENDPOINT only:
1. makes what the template's parameters name and the stack does not make
   itself: a VPC (of `--cidr`) with a subnet in each of three zones, a
   security group, the snapshot buckets `SnapshotBuckets` names, and a
   bucket holding the functions' code;
2. packages: uploads each function's zip to that bucket and points its
   CodeUri there (what `sam package` leaves in the template);
3. transforms the SAM template with aws-sam-translator, offline;
4. creates the stack with realistic parameters, waits for it to end, and
   fails with every resource's reason unless it is CREATE_COMPLETE;
5. with `update`, applies a second version of the stack: the same
   template with the parameters `--set` changes, and waits for
   UPDATE_COMPLETE.

usage: deploy_stack.py create TEMPLATE STACK_NAME [--zip-dir DIR] [--cidr CIDR] [--set PARAMETER=VALUE ...]
       deploy_stack.py update TEMPLATE STACK_NAME [--zip-dir DIR] --set PARAMETER=VALUE ...
"""

import argparse
import ipaddress
import json
import os
import sys
import time
import zipfile
import io

import boto3
from cfnlint.decode import cfn_yaml
from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.public.translator import ManagedPolicyLoader
from samtranslator.translator.transform import transform

FUNCTIONS = ["floe-api", "floe-worker", "floe-snapshotter"]


def endpoint():
    url = os.environ.get("FLOE_TEST_AWS_ENDPOINT", "")
    host = url.removeprefix("http://")
    if not url.startswith("http://") or not (
        host.startswith("127.") or host.startswith("localhost")
    ):
        sys.exit(f"FLOE_TEST_AWS_ENDPOINT must be an http:// loopback address, not {url!r}")
    return url


def client(name):
    return boto3.client(
        name,
        endpoint_url=endpoint(),
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def network(cidr):
    """A VPC of `cidr` with one /24 subnet in each of three zones (its
    second, third and fourth), and a security group."""
    ec2 = client("ec2")
    vpc = ec2.create_vpc(CidrBlock=cidr)["Vpc"]["VpcId"]
    zones = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]][:3]
    blocks = list(ipaddress.ip_network(cidr).subnets(new_prefix=24))[1:4]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=str(block), AvailabilityZone=zone)[
            "Subnet"
        ]["SubnetId"]
        for block, zone in zip(blocks, zones)
    ]
    group = ec2.create_security_group(
        GroupName=f"floe-nodes-{vpc}", Description="Elasticsearch nodes", VpcId=vpc
    )["GroupId"]
    images = {}
    for arch in ["arm64", "x86_64"]:
        found = ec2.describe_images(
            Filters=[{"Name": "architecture", "Values": [arch]}]
        )["Images"]
        if not found:
            sys.exit(f"the endpoint has no {arch} image")
        images[arch] = found[0]["ImageId"]
    return vpc, subnets, group, images


def package(template, zip_dir):
    """Uploads each function's code and points its CodeUri at it."""
    s3 = client("s3")
    bucket = "floe-stack-code"
    try:
        s3.create_bucket(Bucket=bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass  # an earlier stack's, or this one's before an update
    for logical, resource in template["Resources"].items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        uri = resource["Properties"]["CodeUri"]
        name = next((f for f in FUNCTIONS if f"/{f}/" in uri), None)
        if name is None:
            sys.exit(f"{logical}: CodeUri {uri} names no Floe function")
        path = os.path.join(zip_dir, name, "bootstrap.zip") if zip_dir else None
        if path and os.path.exists(path):
            with open(path, "rb") as f:
                body = f.read()
        else:
            # The stack does not run the code: a zip of the right shape
            # stands in when the release zips were not built.
            print(f"{name}: no zip built in {zip_dir or '(no --zip-dir)'}; packaging a stand-in", file=sys.stderr)
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w") as z:
                z.writestr("bootstrap", b"#!/bin/sh\n")
            body = buf.getvalue()
        key = f"{name}/bootstrap.zip"
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        resource["Properties"]["CodeUri"] = f"s3://{bucket}/{key}"


def transformed_template(path, zip_dir, parameters):
    """The template as `sam package` leaves it, transformed for `parameters`."""
    template = cfn_yaml.load(path)
    package(template, zip_dir)
    try:
        return transform(dict(template), parameters, ManagedPolicyLoader(client("iam")))
    except InvalidDocumentException as e:
        sys.exit("aws-sam-translator refused the template: " + "; ".join(str(c) for c in e.causes))


def wait(cfn, stack_name, want):
    """Waits for the stack's operation to end; fails with every failed
    resource's reason unless it ends in `want`."""
    deadline = time.time() + 300
    while True:
        stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
        if not stack["StackStatus"].endswith("_IN_PROGRESS"):
            break
        if time.time() > deadline:
            sys.exit(f"stack still {stack['StackStatus']} after 300 s")
        time.sleep(0.5)
    if stack["StackStatus"] != want:
        events = cfn.describe_stack_events(StackName=stack_name)["StackEvents"]
        reasons = [
            f"{e['LogicalResourceId']}: {e['ResourceStatus']} {e.get('ResourceStatusReason', '')}"
            for e in events
            if "FAILED" in e["ResourceStatus"]
        ]
        sys.exit(f"stack {stack['StackStatus']}: " + "; ".join(reasons))
    return stack


def report(cfn, stack, transformed, parameters):
    """What the stack made, as JSON on stdout."""
    resources = cfn.list_stack_resources(StackName=stack["StackName"])["StackResourceSummaries"]
    made = {r["LogicalResourceId"] for r in resources}
    lam = client("lambda")
    functions = {}
    for r in resources:
        if r["ResourceType"] == "AWS::Lambda::Function":
            conf = lam.get_function_configuration(FunctionName=r["PhysicalResourceId"])
            functions[r["LogicalResourceId"]] = {
                "timeout": conf.get("Timeout"),
                "memory": conf.get("MemorySize"),
                "environment": conf.get("Environment", {}).get("Variables", {}),
            }
    json.dump(
        {
            "status": stack["StackStatus"],
            # Resources of the transformed template the endpoint did not
            # make (moto leaves out types its CloudFormation does not know).
            "not_created": sorted(set(transformed["Resources"]) - made),
            "functions": functions,
            "outputs": {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
            "resources": {
                r["LogicalResourceId"]: {
                    "type": r["ResourceType"],
                    "id": r.get("PhysicalResourceId", ""),
                }
                for r in resources
            },
            "parameters": parameters,
            "template": transformed,
        },
        sys.stdout,
        indent=1,
    )


def snapshot_buckets(parameters):
    """The buckets `SnapshotBuckets` names: the operator's, made before the
    stack that names them."""
    s3 = client("s3")
    for bucket in filter(None, parameters.get("SnapshotBuckets", "").split(",")):
        try:
            s3.create_bucket(Bucket=bucket)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass


def apply(parameters, changes):
    """`--set PARAMETER=VALUE` changes, over the parameters."""
    for change in changes:
        key, _, value = change.partition("=")
        parameters[key] = value


CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]


def create(args):
    vpc, subnets, group, images = network(args.cidr)
    parameters = {
        "JwtIssuer": "https://issuer.example.com/",
        "JwtAudience": "floe-api",
        "JwksUrl": "https://issuer.example.com/.well-known/jwks.json",
        "AmiArm64": images["arm64"],
        "AmiX8664": images["x86_64"],
        "Subnets": ",".join(subnets),
        "SecurityGroups": group,
        "VpcId": vpc,
        "FunctionSubnets": ",".join(subnets),
        # moto keeps an `AWS::NoValue` that an `Fn::If` yields inside a
        # policy's statement list, and refuses the policy; real
        # CloudFormation drops the element. Naming a bucket takes the other
        # branch of that `Fn::If`.
        "SnapshotBuckets": "floe-snapshots",
    }
    apply(parameters, args.set)
    snapshot_buckets(parameters)
    transformed = transformed_template(args.template, args.zip_dir, parameters)
    cfn = client("cloudformation")
    cfn.create_stack(
        StackName=args.stack,
        TemplateBody=json.dumps(transformed),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
        Capabilities=CAPABILITIES,
    )
    report(cfn, wait(cfn, args.stack, "CREATE_COMPLETE"), transformed, parameters)


def update(args):
    """A second version of the stack: its parameters with `--set` applied."""
    cfn = client("cloudformation")
    current = cfn.describe_stacks(StackName=args.stack)["Stacks"][0]
    parameters = {p["ParameterKey"]: p["ParameterValue"] for p in current["Parameters"]}
    apply(parameters, args.set)
    transformed = transformed_template(args.template, args.zip_dir, parameters)
    cfn.update_stack(
        StackName=args.stack,
        TemplateBody=json.dumps(transformed),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
        Capabilities=CAPABILITIES,
    )
    report(cfn, wait(cfn, args.stack, "UPDATE_COMPLETE"), transformed, parameters)


def main():
    args = argparse.ArgumentParser()
    args.add_argument("action", choices=["create", "update"])
    args.add_argument("template")
    args.add_argument("stack")
    args.add_argument("--zip-dir", default="")
    args.add_argument("--cidr", default="10.40.0.0/16", help="the VPC's range (create only)")
    args.add_argument("--set", action="append", default=[], metavar="PARAMETER=VALUE")
    args = args.parse_args()
    # aws-sam-translator reads the region (for ARNs) from the environment.
    os.environ.setdefault("AWS_DEFAULT_REGION", os.environ.get("AWS_REGION", "us-east-1"))
    {"create": create, "update": update}[args.action](args)


if __name__ == "__main__":
    main()
