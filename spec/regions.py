"""Pinned per-region facts, so synth never looks anything up.

S3_PREFIX_LISTS holds the AWS-managed prefix list of the S3 gateway endpoint
(`com.amazonaws.<region>.s3`) per region. The ids are stable, but a region missing
here, or one you want to double-check, is one call away:
`aws ec2 describe-managed-prefix-lists --filters Name=prefix-list-name,Values=com.amazonaws.<region>.s3`.
A spec can always set `network.s3_prefix_list_id` itself.
"""

from __future__ import annotations

# Commercial regions where the services this repo uses (S3 access points, ParallelCluster,
# FSx for Lustre, SageMaker notebooks) are offered.
REGIONS: frozenset[str] = frozenset(
    {
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
        "ca-central-1",
        "sa-east-1",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "eu-central-1",
        "eu-central-2",
        "eu-north-1",
        "eu-south-1",
        "eu-south-2",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-northeast-3",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-southeast-3",
        "ap-southeast-4",
        "ap-south-1",
        "ap-south-2",
        "ap-east-1",
        "me-south-1",
        "me-central-1",
        "il-central-1",
        "af-south-1",
    }
)

S3_PREFIX_LISTS: dict[str, str] = {
    "us-east-1": "pl-63a5400a",
    "us-east-2": "pl-7ba54012",
    "us-west-1": "pl-6ba54002",
    "us-west-2": "pl-68a54001",
    "ca-central-1": "pl-7da54014",
    "sa-east-1": "pl-6aa54003",
    "eu-west-1": "pl-6da54004",
    "eu-west-2": "pl-7ca54015",
    "eu-central-1": "pl-6ea54007",
    "ap-northeast-1": "pl-61a54008",
    "ap-southeast-1": "pl-6fa54006",
    "ap-southeast-2": "pl-6ca54005",
}

# The DynamoDB gateway endpoint's prefix list (`com.amazonaws.<region>.dynamodb`): ParallelCluster's
# head and compute nodes keep cluster state in DynamoDB, so the cluster security group needs HTTPS
# egress to it when a cluster is defined. Regions missing here take `network.dynamodb_prefix_list_id`.
DYNAMODB_PREFIX_LISTS: dict[str, str] = {
    "us-east-1": "pl-02cd2c6b",
    "us-east-2": "pl-4ca54025",
    "us-west-2": "pl-00a54069",
}
