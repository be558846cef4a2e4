"""moto's server (the pinned moto[server]) on 127.0.0.1 at a port the OS picks, with fixes of four moto 5.2.5 bugs
that the CDK CLI's ordinary deploy path runs into.

    python -m tests.rehearsal.moto_server        # prints " * Running on http://127.0.0.1:PORT"

The CDK CLI deploys every stack through a change set (CreateChangeSet, ExecuteChangeSet). In moto 5.2.5:

- change-set outputs: the executed change set's stack gets no Outputs and no exports, and a new change-set stack
  cannot resolve Fn::ImportValue. `cdk deploy --outputs-file` would write `{}`, phase two would have nothing to read
  and the stacks that import the network's exports would fail. Fixed by building them as moto's CreateStack does,
  with moto's own OutputMap over the resources moto created.
- change-set failures: a resource that cannot be created (Fn::GetAtt of a type moto lacks, a model's bug) raises
  out of ExecuteChangeSet as an HTTP 500; the SDK retries, and the retry finds nothing left to add and reports the
  stack CREATE_COMPLETE, with the failed resources missing. CloudFormation fails the stack instead: fixed by
  setting CREATE_FAILED (UPDATE_FAILED) with the error as the stack event's reason, as CloudFormation reports it.
- KMS keys: moto's AWS::KMS::Key reads the template's Tags (Key, Value) as the KMS API's (TagKey, TagValue) and
  fails with KeyError 'TagKey' on every tagged key; and it keeps the KeyPolicy object as it is, on which DescribeKey
  fails (json.loads of a dict). Fixed by handing it the KMS API's tag names and the policy as JSON text.
- EC2 deletes: moto's AWS::EC2::VPCEndpoint and AWS::EC2::RouteTable delete nothing when their stack goes, so
  the VPC keeps dependencies and the network stack's DeleteStack fails. Fixed by deleting them with moto's own
  DeleteVpcEndpoints and DeleteRouteTable.

Nothing else is changed: a resource type moto does not model stays unmodelled. `FIXES` names each fix and each has
an in-process probe of the pinned moto here; tests/test_rehearsal.py asserts that each is still needed (stock moto
misbehaves) and that the fix works, so a fix goes when moto has its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

FIXES = {
    "change-set outputs": (
        "ExecuteChangeSet creates the resources but no stack outputs or exports, and a change-set stack cannot "
        "resolve Fn::ImportValue; the server builds them as moto's CreateStack does"
    ),
    "change-set failures": (
        "a resource that fails raises out of ExecuteChangeSet (HTTP 500), and the SDK's retry reports the stack "
        "CREATE_COMPLETE without it; the server fails the stack (CREATE_FAILED, the error as the event's reason)"
    ),
    "KMS keys": (
        "AWS::KMS::Key fails on the template's Tags (KeyError 'TagKey') and keeps its KeyPolicy as an object, on "
        "which DescribeKey fails (HTTP 500); the server hands them over as the KMS API's TagKey/TagValue and JSON text"
    ),
    "EC2 deletes": (
        "AWS::EC2::VPCEndpoint and AWS::EC2::RouteTable have no CloudFormation delete: they stay when their stack "
        "goes, so the VPC keeps dependencies and DeleteStack fails (DependencyViolation); the server deletes them "
        "with moto's own DeleteVpcEndpoints and DeleteRouteTable"
    ),
}


@contextmanager
def _change_sets() -> Iterator[None]:
    from moto.cloudformation.models import ChangeSet, CloudFormationBackend, Stack

    stock_create = CloudFormationBackend.create_change_set
    stock_execute = CloudFormationBackend.execute_change_set

    def create_change_set(self: CloudFormationBackend, *args: Any, **kwargs: Any) -> tuple[str, str]:
        change_set_id, stack_id = stock_create(self, *args, **kwargs)
        resource_map = self.stacks[stack_id].resource_map
        if True:
            resource_map.cross_stack_resources = self.exports  # the region's exports, as CreateStack passes them
        return change_set_id, stack_id

    def execute_change_set(self: CloudFormationBackend, change_set_name: str, stack_name: str | None = None) -> None:
        # The change set moto runs: by ARN, else the last one of that name (moto's own lookup).
        named = [cs for cs in self.change_sets.values() if cs.change_set_name == change_set_name]
        change_set: ChangeSet | None = self.change_sets.get(change_set_name) or (named[-1] if named else None)
        if change_set is None:
            return stock_execute(self, change_set_name, stack_name)  # moto's own error
        stack: Stack = self.stacks[change_set.stack_id]
        try:
            stock_execute(self, change_set_name, stack_name)
        except Exception as error:
            failed = f"{change_set.change_set_type}_FAILED"
            stack.status = failed
            reason = str(error) if str(error).startswith(("ValidationError", type(error).__name__)) else _said(error)
            stack._add_stack_event(failed, resource_status_reason=reason)
            change_set.execution_status = "EXECUTE_FAILED"
            # What was created stays listed; what failed is not tried again by every later read of the stack.
            resources = stack.resource_map
            resources._resource_json_map = {
                logical_id: resource
                for logical_id, resource in resources._resource_json_map.items()
                if logical_id in resources._parsed_resources
            }
            return None
        for export in stack.exports:
            self.exports.pop(export.name, None)
        stack._parse_template()
        stack.output_map = stack._create_output_map()
        self._validate_export_uniqueness(stack)
        for export in stack.exports:
            self.exports[export.name] = export
        return None

    CloudFormationBackend.create_change_set = create_change_set  # type: ignore[method-assign]
    CloudFormationBackend.execute_change_set = execute_change_set  # type: ignore[method-assign]
    try:
        yield
    finally:
        CloudFormationBackend.create_change_set = stock_create  # type: ignore[method-assign]
        CloudFormationBackend.execute_change_set = stock_execute  # type: ignore[method-assign]


@contextmanager
def _kms_tags() -> Iterator[None]:
    from moto.kms.models import Key

    stock = Key.__dict__["create_from_cloudformation_json"]

    def create_from_cloudformation_json(
        cls: type[Key], resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> Key:
        properties = dict(cloudformation_json["Properties"])
        properties["Tags"] = [{"TagKey": t["Key"], "TagValue": t["Value"]} for t in properties.get("Tags") or []]
        if not isinstance(properties["KeyPolicy"], str):
            properties["KeyPolicy"] = json.dumps(properties["KeyPolicy"])
        fixed_json = {**cloudformation_json, "Properties": properties}
        key: Key = stock.__func__(cls, resource_name, fixed_json, account_id, region_name, **kwargs)
        return key

    Key.create_from_cloudformation_json = classmethod(create_from_cloudformation_json)  # type: ignore[method-assign,assignment,arg-type]
    try:
        yield
    finally:
        Key.create_from_cloudformation_json = stock  # type: ignore[method-assign]


@contextmanager
def _ec2_deletes() -> Iterator[None]:
    """CloudFormation deletes for two EC2 models that have none, through moto's own EC2 API calls."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.route_tables import RouteTable
    from moto.ec2.models.vpcs import VPCEndPoint

    def delete_endpoint(
        cls: type, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        backend = ec2_backends[account_id][region_name]
        endpoint = backend.vpc_end_points.get(resource_name)
        if endpoint is not None:  # its routes go with it, from the route tables still there (moto deletes unordered)
            endpoint.route_table_ids = [rtb for rtb in endpoint.route_table_ids if rtb in backend.route_tables]
            backend.delete_vpc_endpoints([resource_name])

    def delete_route_table(
        cls: type, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        backend = ec2_backends[account_id][region_name]
        if resource_name in backend.route_tables:  # (the VPC's deletion may have taken it already)
            backend.delete_route_table(resource_name)

    patched = ((VPCEndPoint, delete_endpoint), (RouteTable, delete_route_table))
    stock = {model: model.__dict__.get("delete_from_cloudformation_json") for model, _ in patched}
    for model, delete in patched:
        model.delete_from_cloudformation_json = classmethod(delete)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        for model, original in stock.items():
            if original is None:
                del model.delete_from_cloudformation_json
            else:
                model.delete_from_cloudformation_json = original  # type: ignore[method-assign]


@contextmanager
def fixed() -> Iterator[None]:
    """moto with the fixes applied inside the block (this process only)."""
    with ExitStack() as stack:
        stack.enter_context(_change_sets())
        stack.enter_context(_kms_tags())
        stack.enter_context(_ec2_deletes())
        yield


# -- probes of the pinned moto, in-process --------------------------------------------------------------------------

OUTPUTS_PROBE = {
    "Resources": {
        "Parameter": {"Type": "AWS::SSM::Parameter", "Properties": {"Name": "/probe", "Type": "String", "Value": "v"}}
    },
    "Outputs": {"Name": {"Value": {"Ref": "Parameter"}, "Export": {"Name": "probe-name"}}},
}
IMPORT_PROBE = {
    "Resources": {
        "Copy": {
            "Type": "AWS::SSM::Parameter",
            "Properties": {"Name": "/probe-copy", "Type": "String", "Value": {"Fn::ImportValue": "probe-name"}},
        }
    }
}
# A parameter holding the Arn of a type moto does not model: CloudFormation would create both; moto cannot.
FAILURE_PROBE = {
    "Resources": {
        "Workspace": {"Type": "AWS::APS::Workspace", "Properties": {}},
        "Parameter": {
            "Type": "AWS::SSM::Parameter",
            "Properties": {"Name": "/probe", "Type": "String", "Value": {"Fn::GetAtt": ["Workspace", "Arn"]}},
        },
    }
}
KMS_PROBE = {
    "Resources": {
        "Key": {
            "Type": "AWS::KMS::Key",
            "Properties": {
                "KeyPolicy": {"Version": "2012-10-17", "Statement": []},
                "Tags": [{"Key": "k", "Value": "v"}],
            },
        }
    }
}
KMS_POLICY_PROBE = {
    "Resources": {
        "Key": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": {"Version": "2012-10-17", "Statement": []}}}
    }
}
# A VPC with a route table and an S3 gateway endpoint routed through it, as the network stack has.
EC2_PROBE = {
    "Resources": {
        "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
        "Routes": {"Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": {"Ref": "Vpc"}}},
        "S3": {
            "Type": "AWS::EC2::VPCEndpoint",
            "Properties": {
                "VpcId": {"Ref": "Vpc"},
                "ServiceName": "com.amazonaws.us-east-1.s3",
                "VpcEndpointType": "Gateway",
                "RouteTableIds": [{"Ref": "Routes"}],
            },
        },
    }
}


def _said(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def probe(*templates: dict[str, Any], delete: bool = False, region: str = "us-east-1") -> dict[str, Any]:
    """Stacks made by CreateChangeSet + ExecuteChangeSet from `templates` in order, in-process (the first failed
    ExecuteChangeSet is retried once, as the SDK retries a 500); what became of the last one: `Status`, `Outputs`,
    `Error` (what its first ExecuteChangeSet raised), `Created` (logical ids listed with a physical id, None when
    DescribeStackResources fails), `Described` (whether DescribeKey works on its KMS keys) and, with `delete`,
    `Deleted` ('' or what DeleteStack raised)."""
    import boto3
    from moto import mock_aws

    found: dict[str, Any] = {}
    name = ""
    with mock_aws():
        cfn = boto3.client("cloudformation", region_name=region)
        for number, template in enumerate(templates):
            name = f"probe{number}"
            cfn.create_change_set(
                StackName=name, ChangeSetName="probe", ChangeSetType="CREATE", TemplateBody=json.dumps(template)
            )
            found["Error"] = ""
            try:
                cfn.execute_change_set(ChangeSetName="probe", StackName=name)
            except Exception as raised:
                found["Error"] = _said(raised)
                try:
                    cfn.execute_change_set(ChangeSetName="probe", StackName=name)
                except Exception as again:
                    found["Retry"] = _said(again)
        stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
        found |= {"Status": stack["StackStatus"], "Outputs": stack.get("Outputs", [])}
        try:
            resources = cfn.describe_stack_resources(StackName=name)["StackResources"]
        except Exception as raised:
            found |= {"Created": None, "ListError": _said(raised)}
            resources = []
        else:
            found["Created"] = sorted(r["LogicalResourceId"] for r in resources if r.get("PhysicalResourceId"))
        keys = [r["PhysicalResourceId"] for r in resources if r["ResourceType"] == "AWS::KMS::Key"]
        try:
            for key in keys:
                boto3.client("kms", region_name=region).describe_key(KeyId=key)
            found["Described"] = bool(keys)
        except Exception:
            found["Described"] = False
        if delete:
            try:
                cfn.delete_stack(StackName=name)
                found["Deleted"] = ""
            except Exception as raised:
                found["Deleted"] = _said(raised)
    return found


def main() -> None:
    from moto.server import main as serve

    with fixed():
        serve(["--host", "127.0.0.1", "--port", "0"])


if __name__ == "__main__":
    main()
