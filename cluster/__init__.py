"""The ParallelCluster side: instance facts, the cluster config builder, validators and update plans.

Import submodules directly (cluster.instances, cluster.config_builder, ...); this package imports
nothing heavy so the head node and the training planner can read the facts table cheaply.
"""
