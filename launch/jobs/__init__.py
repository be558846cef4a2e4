"""SLURM job parts: bash pieces assembled into sbatch scripts by slurm.render, the NeMo Framework entry points
(bridge_pretrain.py and nemo_pretrain.py, run by path inside the container, and job_contract.py, what they share) and
job configs for the published Neuron shapes (configs/).
"""
