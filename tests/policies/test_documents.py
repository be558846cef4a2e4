"""The policy builders on their own: shapes a reviewer checks first."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies import access_point_policy, bucket_policy, gateway_endpoint_policy, identity_policy, key_policy
from policies.artifacts import artifacts_bucket_policy, artifacts_read_policy
from policies.documents import object_arns
from policies.guardrails import guardrail_scps
from policies.interface_endpoints import interface_endpoint_policy
from spec import DEFAULT_SPEC_PATH, DeploymentSpec, load_spec


@pytest.fixture(scope="module")
def spec() -> DeploymentSpec:
    return load_spec()


def _statements(document: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    assert document is not None
    return {s["Sid"]: s for s in document["Statement"]}


def test_object_arns_use_the_access_point_object_form() -> None:
    ap = "arn:aws:s3:us-east-1:222222222222:accesspoint/x"
    assert object_arns(ap, "a/b/") == f"{ap}/object/a/b/*"
    assert object_arns("arn:aws:s3:::bucket", "a/") == "arn:aws:s3:::bucket/a/*"


def test_access_point_policy_scopes_each_role_kind(spec: DeploymentSpec) -> None:
    dataset = spec.dataset("pretraining")
    statements = _statements(access_point_policy(spec, dataset))
    ap = spec.access_point_arn(dataset)
    assert statements["ReadersGetUnderDatasetPrefix"]["Resource"] == f"{ap}/object/corpora/pretraining/*"
    assert statements["ReadersListUnderDatasetPrefix"]["Condition"]["StringLike"] == {
        "s3:prefix": "corpora/pretraining/*"
    }
    writers = statements["WritersPutUnderOutputPrefix"]
    assert writers["Resource"] == f"{ap}/object/corpora/pretraining/tokenized/*"
    assert writers["Condition"]["ArnLike"]["aws:PrincipalArn"] == spec.role_arn("head-node")
    assert "s3:GetObject" not in writers["Action"]


def test_read_only_dataset_has_no_write_statement(spec: DeploymentSpec) -> None:
    statements = _statements(access_point_policy(spec, spec.dataset("finetuning")))
    assert "WritersPutUnderOutputPrefix" not in statements
    assert "s3:PutObject" not in json.dumps(statements)


KEY = "arn:aws:kms:us-east-1:222222222222:key/0f0e0d0c-0b0a-0908-0706-050403020100"


def test_bucket_policy_has_org_perimeter_and_optional_vpc_origin_deny(spec: DeploymentSpec) -> None:
    statements = _statements(bucket_policy(spec, KEY))
    perimeter = statements["DenyPrincipalsOutsideOrganization"]
    assert perimeter["Condition"]["StringNotEqualsIfExists"] == {"aws:PrincipalOrgID": spec.organization_id}
    assert "DenyObjectAccessNotFromVpcAccessPoints" not in statements
    strict = spec.model_copy(
        update={"perimeter": spec.perimeter.model_copy(update={"require_vpc_origin_on_bucket": True})}
    )
    vpc_deny = _statements(bucket_policy(strict, KEY))["DenyObjectAccessNotFromVpcAccessPoints"]
    assert vpc_deny["Condition"] == {"StringNotEquals": {"s3:AccessPointNetworkOrigin": "VPC"}}


def test_no_org_condition_when_perimeter_is_off(spec: DeploymentSpec) -> None:
    open_spec = spec.model_copy(update={"perimeter": spec.perimeter.model_copy(update={"organization_bound": False})})
    assert "aws:PrincipalOrgID" not in json.dumps(bucket_policy(open_spec, KEY))
    assert "aws:PrincipalOrgID" not in json.dumps(gateway_endpoint_policy(open_spec))
    for service in ("logs", "ecr.api", "ec2", "sts"):
        text = json.dumps(interface_endpoint_policy(open_spec, service))
        assert "aws:PrincipalOrgID" not in text and "aws:PrincipalAccount" in text, service


def test_access_points_fall_back_to_vpc_origin_until_the_endpoint_id_is_known(spec: DeploymentSpec) -> None:
    unpinned = spec.model_copy(update={"network": spec.network.model_copy(update={"s3_gateway_endpoint_id": None})})
    for statement in access_point_policy(unpinned, spec.dataset("pretraining"))["Statement"]:
        assert statement["Condition"]["StringEquals"] == {"s3:AccessPointNetworkOrigin": "VPC"}


def test_guardrails_follow_the_spec(spec: DeploymentSpec) -> None:
    guardrails = guardrail_scps(spec)
    assert guardrails is not None
    statements = _statements(guardrails)
    assert statements["DenyPresignedNotebookUrlsOutsideVpc"]["Condition"] == {
        "StringNotEquals": {"aws:SourceVpce": spec.network.sagemaker_api_endpoint_id}
    }
    no_endpoint = spec.model_copy(
        update={"network": spec.network.model_copy(update={"sagemaker_api_endpoint_id": None})}
    )
    fallback = _statements(guardrail_scps(no_endpoint))["DenyPresignedNotebookUrlsOutsideVpc"]
    assert fallback["Condition"] == {"StringNotEquals": {"aws:SourceVpc": spec.network.vpc_id}}
    no_operators = spec.model_copy(update={"perimeter": spec.perimeter.model_copy(update={"operator_roles": []})})
    assert "DenySessionsOnInstancesExceptOperators" not in _statements(guardrail_scps(no_operators))
    off = spec.model_copy(update={"perimeter": spec.perimeter.model_copy(update={"guardrail_scps": False})})
    assert guardrail_scps(off) is None


def test_endpoint_policy_lists_both_access_point_and_bucket_arns(spec: DeploymentSpec) -> None:
    datasets = _statements(gateway_endpoint_policy(spec))["DatasetsThroughAccessPoints"]
    for dataset in spec.data.datasets:
        assert spec.access_point_arn(dataset) in datasets["Resource"]
        assert f"{spec.access_point_arn(dataset)}/object/*" in datasets["Resource"]
    assert {spec.bucket_arn, f"{spec.bucket_arn}/*"} <= set(datasets["Resource"])


def test_endpoint_policy_never_writes_to_aws_owned_buckets_except_cloudformation_signals(spec: DeploymentSpec) -> None:
    statements = _statements(gateway_endpoint_policy(spec))
    assert statements["ReadAwsOwnedBucketsNodesNeed"]["Action"] == "s3:GetObject"
    signals = statements["SignalCloudFormation"]["Resource"]
    assert signals == f"arn:aws:s3:::cloudformation-waitcondition-{spec.region}/*"
    for sid in ("ParallelClusterBuckets", "ReadComputeAccountDeploymentBuckets"):
        own = statements[sid]["Condition"]["StringEquals"]
        assert own["aws:ResourceAccount"] == spec.accounts.compute
    # Assets and the wheelhouse are only read: nothing in the VPC may write there.
    assert "s3:PutObject" not in statements["ReadComputeAccountDeploymentBuckets"]["Action"]


def test_identity_policy_only_for_roles_with_grants(spec: DeploymentSpec) -> None:
    assert identity_policy(spec, "arn:aws:iam::111111111111:role/unrelated") is None
    head = _statements(identity_policy(spec, "head-node"))
    assert set(head) == {
        "ReadPretraining",
        "ListPretraining",
        "WritePretraining",
        "ReadCheckpoints",
        "ListCheckpoints",
        "UseDatasetKeyThroughS3",
    }
    notebook_key = _statements(identity_policy(spec, "notebook"))["UseDatasetKeyThroughS3"]
    assert notebook_key["Action"] == "kms:Decrypt"
    assert notebook_key["Condition"]["StringEquals"] == {"kms:ViaService": "s3.us-east-1.amazonaws.com"}


def test_key_policy_decrypt_and_encrypt_principals(spec: DeploymentSpec) -> None:
    statements = _statements(key_policy(spec))
    readers = statements["DatasetPrincipalsDecryptThroughS3"]["Condition"]["ArnLike"]["aws:PrincipalArn"]
    assert set(readers) == {spec.role_arn(r) for r in ("cluster-node", "head-node", "notebook")}
    writers = statements["DatasetWritersEncryptThroughS3"]["Condition"]["ArnLike"]["aws:PrincipalArn"]
    assert set(writers) == {spec.role_arn("head-node"), spec.role_arn("cluster-node")}


# ---- the nodes' artifacts (spec.artifacts, policies.artifacts) ----------------------------------------------------

ARTIFACTS = "arn:aws:s3:::llm-demo-artifacts-111111111111"
WHEELHOUSE = "wheelhouse/py3.11/"


def test_the_head_node_reads_the_wheelhouse_the_nccl_tests_source_and_nothing_else_of_the_bucket(
    spec: DeploymentSpec,
) -> None:
    statements = _statements(artifacts_read_policy(spec, "head-node"))
    assert statements == {
        "ReadPythonWheelhouse": {
            "Sid": "ReadPythonWheelhouse",
            "Effect": "Allow",
            "Action": "s3:GetObject",
            "Resource": f"{ARTIFACTS}/{WHEELHOUSE}*",  # the observability/ binaries lie inside
        },
        "ListPythonWheelhouse": {
            "Sid": "ListPythonWheelhouse",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": ARTIFACTS,
            "Condition": {"StringLike": {"s3:prefix": f"{WHEELHOUSE}*"}},
        },
        # docs/fabric-checks.md: the head node copies the nccl-tests source to /fsx, a GPU node builds it.
        "ReadNcclTestsSource": {
            "Sid": "ReadNcclTestsSource",
            "Effect": "Allow",
            "Action": "s3:GetObject",
            "Resource": f"{ARTIFACTS}/nccl-tests/*",
        },
        "ListNcclTestsSource": {
            "Sid": "ListNcclTestsSource",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": ARTIFACTS,
            "Condition": {"StringLike": {"s3:prefix": "nccl-tests/*"}},
        },
    }
    # GPU nodes read nothing there (the head node stages the binaries on shared storage); nor does anyone else.
    assert artifacts_read_policy(spec, "cluster-node") is None
    assert artifacts_read_policy(spec, "notebook") is None


def test_trainium_nodes_read_their_nxdt_wheelhouse_only() -> None:
    trn1 = load_spec(DEFAULT_SPEC_PATH.parent / "examples" / "trn1-neuron.yaml")
    statements = _statements(artifacts_read_policy(trn1, "cluster-node"))
    assert set(statements) == {"ReadNxdtWheelhouse", "ListNxdtWheelhouse"}
    assert statements["ReadNxdtWheelhouse"]["Resource"] == f"{ARTIFACTS}/nxdt/2.26.1/*"
    assert statements["ListNxdtWheelhouse"]["Condition"] == {"StringLike": {"s3:prefix": "nxdt/2.26.1/*"}}
    head = _statements(artifacts_read_policy(trn1, "head-node"))
    assert set(head) == {"ReadPythonWheelhouse", "ListPythonWheelhouse", "ReadNxdtExamples"}
    # docs/jobs.md: the head node unpacks NxDT's launcher onto /fsx; of the NxDT folder it reads that one object.
    assert head["ReadNxdtExamples"] == {
        "Sid": "ReadNxdtExamples",
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": f"{ARTIFACTS}/nxdt/2.26.1/nxdt-examples.tar.gz",
    }


def test_the_endpoint_reaches_the_artifact_folders_read_only(spec: DeploymentSpec) -> None:
    reads = _statements(gateway_endpoint_policy(spec))["ReadComputeAccountDeploymentBuckets"]
    assert {ARTIFACTS, f"{ARTIFACTS}/{WHEELHOUSE}*", f"{ARTIFACTS}/nccl-tests/*"} <= set(reads["Resource"])
    assert f"{ARTIFACTS}/*" not in reads["Resource"]  # the folders, not the bucket
    assert set(reads["Action"]) == {"s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation"}
    assert reads["Condition"]["StringEquals"]["aws:ResourceAccount"] == spec.accounts.compute
    for statement in gateway_endpoint_policy(spec)["Statement"]:
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        if any(r.startswith(ARTIFACTS) for r in resources):
            assert statement["Sid"] == "ReadComputeAccountDeploymentBuckets"


def test_a_wheelhouse_in_another_bucket_is_read_there(spec: DeploymentSpec) -> None:
    assert spec.cluster is not None
    cluster = spec.cluster.model_copy(update={"python_wheelhouse": "s3://team-wheels-111111111111/py311/"})
    own = spec.model_copy(update={"cluster": cluster})
    reads = _statements(artifacts_read_policy(own, "head-node"))["ReadPythonWheelhouse"]
    assert reads["Resource"] == "arn:aws:s3:::team-wheels-111111111111/py311/*"
    endpoint = _statements(gateway_endpoint_policy(own))["ReadComputeAccountDeploymentBuckets"]["Resource"]
    assert "arn:aws:s3:::team-wheels-111111111111/py311/*" in endpoint
    # Of the artifacts bucket, the nodes then read the nccl-tests source only.
    assert {r for r in endpoint if r.startswith(ARTIFACTS)} == {ARTIFACTS, f"{ARTIFACTS}/nccl-tests/*"}


def test_the_artifacts_bucket_policy_denies_plain_http_and_outsiders(spec: DeploymentSpec) -> None:
    statements = _statements(artifacts_bucket_policy(spec))
    assert set(statements) == {"DenyRequestsWithoutTls", "DenyPrincipalsOutsideOrganization"}
    assert all(s["Effect"] == "Deny" for s in statements.values())  # it grants nothing
    assert statements["DenyRequestsWithoutTls"]["Resource"] == [ARTIFACTS, f"{ARTIFACTS}/*"]
    unbound = spec.model_copy(update={"perimeter": spec.perimeter.model_copy(update={"organization_bound": False})})
    assert set(_statements(artifacts_bucket_policy(unbound))) == {"DenyRequestsWithoutTls"}
