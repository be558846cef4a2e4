"""The ParallelCluster side: the cluster config builder, payload, update plans, bootstrap, health and fabric checks.

Import submodules directly (cluster.config_builder, cluster.payload, ...); this package imports
nothing heavy. Instance facts and the spec-level cluster rules live in spec.platform.
"""
