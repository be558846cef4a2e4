"""No AWS call leaves this folder's scripts: `refuse_aws_calls()` before ParallelCluster loads a config.

ParallelCluster's schema loads offline with any region and dummy credentials, but building the loaded config makes
one AWS call: `SlurmClusterConfig.__init__` (pcluster/config/cluster_config.py) prefetches, for its validators, the
capacity reservations the queues name (EC2 DescribeCapacityReservations: ODCR and Capacity Block queues). No
validator that reads them runs here (validate_config.py runs only offline ones), so that call is answered in the
process with no reservations. Any other AWS call is refused with an error naming it: a new call in a later
ParallelCluster is a finding to look at, never a request to the network.
"""

from typing import Any

import boto3
from botocore.awsrequest import AWSResponse

# "service.Operation" -> its parsed answer: calls that only fill a cache no check here reads.
ANSWERED: dict[str, dict[str, Any]] = {"ec2.DescribeCapacityReservations": {"CapacityReservations": []}}


class AwsCallRefused(RuntimeError):
    """An AWS call that this offline check does not answer."""


def _answer_or_refuse(model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
    call = f"{model.service_model.service_name}.{model.name}"
    if call not in ANSWERED:
        raise AwsCallRefused(f"{call}: an AWS call; ParallelCluster's checks here run offline (offline.py)")
    return AWSResponse(f"offline:{call}", 200, {}, None), ANSWERED[call]


def refuse_aws_calls() -> None:
    """Every client of boto3's default session (ParallelCluster's) made from now on answers or refuses in-process."""
    if boto3.DEFAULT_SESSION is None:
        boto3.setup_default_session()
    assert boto3.DEFAULT_SESSION is not None
    boto3.DEFAULT_SESSION.events.register("before-call", _answer_or_refuse, unique_id="offline-refuse-aws-calls")
