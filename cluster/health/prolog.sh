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

# A private scratch directory per job on node-local storage (lib.sh: nothing planted at its name is followed); the
# epilog removes it.
# The job user's own directories under $HEALTH_USER_DIRS (enroot's paths on a GPU node), kept across jobs (lib.sh).
if ! health_make_job_scratch || ! health_make_user_dirs; then
	health_drain_on_failure prolog
	exit 1
fi
exit 0
