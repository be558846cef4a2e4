"""Verification of what cluster/ builds, against the real counterparts: ParallelCluster's own schema and builders
(pcluster/), a real SLURM cluster on this host (local_slurm/), a local Prometheus (local_observability), and the
runtime contract the nodes' roles and agents must keep (runtime_contract). Like policies/verify/: nothing else in
cluster/ imports it, and the head node does not need it to run jobs.
"""
