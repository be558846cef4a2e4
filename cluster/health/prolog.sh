#!/usr/bin/env bash
# SLURM Prolog (PrologFlags=Alloc: runs on every node of a job before the job starts).
# Checks the node against its instance type (accelerators, uncorrected ECC errors, EFA interfaces, free
# space on the shared and local file systems). A failing node is drained with the reason and the prolog
# exits non-zero, so SLURM requeues the job onto healthy nodes. Settings: see lib.sh.
set -uo pipefail

HEALTH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HEALTH_DIR/lib.sh"

health_load_config
health_defaults
health_run_checks

if ! health_drain_on_failure prolog; then
	exit 1
fi

# A private scratch directory per job on node-local storage; the epilog removes it.
if [[ -n "$HEALTH_SCRATCH_PATH" && -n "${SLURM_JOB_ID:-}" && -d "$HEALTH_SCRATCH_PATH" ]]; then
	job_scratch="$HEALTH_SCRATCH_PATH/slurm-$SLURM_JOB_ID"
	mkdir -p "$job_scratch" && chmod 700 "$job_scratch"
	if [[ -n "${SLURM_JOB_UID:-}" ]]; then
		chown "$SLURM_JOB_UID:${SLURM_JOB_GID:-$SLURM_JOB_UID}" "$job_scratch"
	fi
fi
exit 0
