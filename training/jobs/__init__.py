"""SLURM job parts: bash pieces assembled into sbatch scripts by slurm.render, the NeMo runner
(nemo_pretrain.py, run inside the NeMo container) and job configs for the published Neuron shapes (configs/).
"""
