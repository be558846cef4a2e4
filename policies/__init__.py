"""Every policy document of the data path, as pure functions of the deployment spec.

The stacks attach exactly these documents, and the tests evaluate exactly these documents
(and the copies they find in the synthesized templates), so the two cannot drift apart.
"""

from policies.access_point import access_point_policy
from policies.bucket import bucket_policy
from policies.endpoint import (
    AWS_OWNED_BUCKETS,
    aws_owned_bucket_arns,
    dynamodb_endpoint_policy,
    gateway_endpoint_policy,
)
from policies.identity import identity_policy
from policies.kms import key_policy

__all__ = [
    "AWS_OWNED_BUCKETS",
    "access_point_policy",
    "aws_owned_bucket_arns",
    "bucket_policy",
    "dynamodb_endpoint_policy",
    "gateway_endpoint_policy",
    "identity_policy",
    "key_policy",
]
