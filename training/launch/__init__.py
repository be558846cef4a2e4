"""Rendering and submitting SLURM jobs: where a job runs (target), whether it fits (fit), its environment
(netenv), the backend configs (nemo, neuron) and the sbatch script (render). `python -m training.submit` uses them.
"""
