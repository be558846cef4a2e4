"""Rendering training jobs for SLURM: whether a job fits (fit), the backend configs (nemo, neuron) and the
sbatch scripts (scripts), on top of the slurm package. `python -m launch.submit` uses them.
"""
