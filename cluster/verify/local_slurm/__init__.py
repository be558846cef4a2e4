"""A real multi-node SLURM cluster on one host, for the tests and the demo: `python -m cluster.verify.local_slurm up`."""

from cluster.verify.local_slurm.harness import DEFAULT_STATE_DIR, PARTITION, LocalSlurm, LocalSlurmError, NodeState

__all__ = ["DEFAULT_STATE_DIR", "PARTITION", "LocalSlurm", "LocalSlurmError", "NodeState"]
