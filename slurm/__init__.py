"""SLURM, independent of what runs in the job: where a job runs (target: queue -> instance facts), the
fabric's environment (netenv), sbatch script assembly (render), sbatch itself (submission) and the one error
type of the submit path (errors). launch.submit and cluster.fabric both build on it.
"""
