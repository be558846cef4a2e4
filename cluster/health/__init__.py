"""Node health checks: the SLURM prolog/epilog (bash) and the settings they read (facts.py)."""
