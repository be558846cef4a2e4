"""Facts about the platform the spec names, and the rules a spec must meet against them: instance types
(instances), Neuron SDK releases (neuron) and the cluster section's cross-field checks (validators, run by
spec.checks). Below everything else: no import of cluster, training or slurm.
"""
