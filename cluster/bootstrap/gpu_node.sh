#!/usr/bin/env bash
# OnNodeConfigured for GPU queues (p4d/p4de/p5/p5e/p5en), run as root by ParallelCluster.
#
#   gpu_node.sh --gpus 8 --efa-devices 32 --pyxis true --enroot-dir /scratch/enroot \
#               --container-image /fsx/containers/llm-nemo-efa-25.07.00-efa1.43.2.sqsh [--python python3.11]
#               [--shared-dir /fsx --scratch-dir /scratch --min-fsx-free-gib 106 --min-scratch-free-gib 20]
#
# 1. Sanity: the node has the GPUs and EFA devices its instance type promises (facts table), and
#    libfabric's EFA provider answers (`fi_info -p efa`). A short node fails its bootstrap here instead
#    of hanging the first NCCL job.
# 2. enroot/pyxis: runtime, data and cache paths on node-local disk. Never on shared storage: each
#    node unpacks images itself, and a shared runtime path breaks multi-node srun. Every path is per user under
#    a root-owned 0755 parent (the prolog makes the job user's directory, mode 700), /dev is not restricted (EFA's uverbs devices
#    must be visible in the container, or NCCL falls back to sockets), and an ECR image gets credentials
#    from the node role (docs/containers.md).
# 3. Job environment for EFA/NCCL (/etc/profile.d) and the health-check settings the SLURM prolog reads.
#
# Every system path can be redirected (NODE_ROOT, SYSFS_ROOT, NVIDIA_SMI, FI_INFO) for tests.
set -euo pipefail

NODE_ROOT="${NODE_ROOT:-}"
SYSFS_ROOT="${SYSFS_ROOT:-/sys}"
NVIDIA_SMI="${NVIDIA_SMI:-nvidia-smi}"
FI_INFO="${FI_INFO:-/opt/amazon/efa/bin/fi_info}"

die() {
	echo "gpu_node: $*" >&2
	exit 1
}
log() { echo "gpu_node: $*" >&2; }

gpus="" efa_devices="" pyxis="true" enroot_dir="/scratch/enroot" container_image="" python="" shared_dir="" scratch_dir=""
# The prolog's free-space floors, GiB (the config builder derives them from the spec: cluster.stop_save).
min_fsx_free_gib=100 min_scratch_free_gib=20
while [[ $# -gt 0 ]]; do
	[[ $# -ge 2 ]] || die "argument $1 needs a value"
	case "$1" in
	--gpus) gpus="$2" ;;
	--efa-devices) efa_devices="$2" ;;
	--pyxis) pyxis="$2" ;;
	--enroot-dir) enroot_dir="$2" ;;
	--container-image) container_image="$2" ;;
	--python) python="$2" ;;
	--shared-dir) shared_dir="$2" ;;
	--scratch-dir) scratch_dir="$2" ;;
	--min-fsx-free-gib) min_fsx_free_gib="$2" ;;
	--min-scratch-free-gib) min_scratch_free_gib="$2" ;;
	*) die "unknown argument $1 (expected --gpus, --efa-devices, --pyxis, --enroot-dir, --container-image, --python, --shared-dir, --scratch-dir, --min-fsx-free-gib, --min-scratch-free-gib)" ;;
	esac
	shift 2
done
[[ "$gpus" =~ ^[0-9]+$ ]] || die "--gpus must be a whole number, not '$gpus'"
[[ "$efa_devices" =~ ^[0-9]+$ ]] || die "--efa-devices must be a whole number, not '$efa_devices'"
[[ "$pyxis" == true || "$pyxis" == false ]] || die "--pyxis must be true or false, not '$pyxis'"
[[ "$enroot_dir" == /* ]] || die "--enroot-dir must be an absolute path, not '$enroot_dir'"
[[ -z "$shared_dir" || "$shared_dir" == /* ]] || die "--shared-dir must be an absolute path, not '$shared_dir'"
[[ -z "$scratch_dir" || "$scratch_dir" == /* ]] || die "--scratch-dir must be an absolute path, not '$scratch_dir'"
[[ "$min_fsx_free_gib" =~ ^[0-9]+$ ]] || die "--min-fsx-free-gib must be a whole number of GiB, not '$min_fsx_free_gib'"
[[ "$min_scratch_free_gib" =~ ^[0-9]+$ ]] || die "--min-scratch-free-gib must be a whole number of GiB, not '$min_scratch_free_gib'"

# ---- 0. the interpreter the shared training env (built by the head node) links to ----------------
if [[ -n "$python" ]]; then
	if ! command -v "$python" >/dev/null && [[ "${PYTHON_INSTALL:-true}" == true && "$python" != */* ]] && command -v dnf >/dev/null; then
		# Amazon Linux's repositories are reachable offline through the S3 gateway endpoint.
		dnf install -y -q "$python" >&2 || true
	fi
	command -v "$python" >/dev/null ||
		die "--python $python not found: the shared training env needs it on every node (install it in the AMI)"
fi

# ---- people's accounts (cluster.users), from the release the head node laid onto shared storage ----------
# The same groups and users, with the same ids, as the head node (cluster/users.py): ownership on /fsx is one person
# on every node, and sudo is the admins' alone. No homes here: /home is the head node's, NFS-shared.
accounts="$shared_dir/llm-training/users/accounts.sh"
if [[ -n "$shared_dir" && -f "$accounts" ]]; then
	ACCOUNTS_ROOT="$NODE_ROOT" bash "$accounts" >&2 ||
		die "$accounts failed: the accounts of cluster.users are not in place (the reason is above)"
fi

# ---- 1. hardware sanity -------------------------------------------------------------------------
found_gpus=$("$NVIDIA_SMI" --query-gpu=index --format=csv,noheader | grep -c . || true)
[[ "$found_gpus" -eq "$gpus" ]] || die "found $found_gpus GPUs, expected $gpus (nvidia-smi); replace this node"

if [[ "$efa_devices" -gt 0 ]]; then
	found_efa=0
	if [[ -d "$SYSFS_ROOT/class/infiniband" ]]; then
		found_efa=$(find "$SYSFS_ROOT/class/infiniband" -mindepth 1 -maxdepth 1 | grep -c . || true)
	fi
	[[ "$found_efa" -eq "$efa_devices" ]] ||
		die "found $found_efa EFA devices in $SYSFS_ROOT/class/infiniband, expected $efa_devices; check the launch template's network cards"
	"$FI_INFO" -p efa -t FI_EP_RDM >/dev/null 2>&1 ||
		die "fi_info -p efa finds no EFA provider: libfabric cannot use EFA (is the EFA driver loaded?)"
	log "EFA ok: $found_efa devices, provider efa"
fi

# ---- 2. enroot and pyxis ------------------------------------------------------------------------
if [[ "$pyxis" == true ]]; then
	# Each user's runtime, data, cache and temporary directory is <parent>/user-<uid>. The parents are root's and
	# 0755: were they 1777, any user could make another's directory (or a link named like it) first and plant an
	# image or rootfs that user's enroot would run, or read their cache. The prolog makes the job user's own, mode 700
	# (cluster/health/lib.sh health_make_user_dirs, reading HEALTH_USER_DIRS below).
	enroot_parents=("/run/enroot" "$enroot_dir/data" "$enroot_dir/cache" "$enroot_dir/tmp")
	install -d -m 0755 "$NODE_ROOT$enroot_dir" "${enroot_parents[@]/#/$NODE_ROOT}"
	install -d -m 0755 "$NODE_ROOT/etc/enroot" "$NODE_ROOT/run/pyxis"
	config_line=""
	# An ECR image (<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>): enroot logs in with a token of the
	# node role, fetched when it pulls (enroot runs the command in the credentials file).
	if [[ "$container_image" =~ ^([0-9]{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com/ ]]; then
		registry="${container_image%%/*}"
		region="${BASH_REMATCH[2]}"
		install -d -m 0755 "$NODE_ROOT/etc/enroot/config"
		echo "machine $registry login AWS password \$(aws ecr get-login-password --region $region)" \
			>"$NODE_ROOT/etc/enroot/config/.credentials"
		chmod 0644 "$NODE_ROOT/etc/enroot/config/.credentials"
		config_line="ENROOT_CONFIG_PATH /etc/enroot/config"
		log "enroot pulls from $registry with the node role's ECR token"
	fi
	cat >"$NODE_ROOT/etc/enroot/enroot.conf" <<CONF
# Written by gpu_node.sh: everything on node-local disk, per user.
ENROOT_RUNTIME_PATH /run/enroot/user-\$(id -u)
ENROOT_DATA_PATH $enroot_dir/data/user-\$(id -u)
ENROOT_CACHE_PATH $enroot_dir/cache/user-\$(id -u)
ENROOT_TEMP_PATH $enroot_dir/tmp/user-\$(id -u)
ENROOT_SQUASH_OPTIONS -noI -noD -noF -noX -no-duplicates
ENROOT_MOUNT_HOME y
ENROOT_RESTRICT_DEV no
ENROOT_ROOTFS_WRITABLE y
$config_line
CONF
	log "enroot paths under $enroot_dir (node-local)"
fi

# ---- 3. job environment and health settings -----------------------------------------------------
install -d -m 0755 "$NODE_ROOT/etc/profile.d" "$NODE_ROOT/etc/llm-health" "$NODE_ROOT/etc/llm-cluster"
cat >"$NODE_ROOT/etc/profile.d/llm-efa.sh" <<'CONF'
# Written by gpu_node.sh: NCCL over EFA (libfabric >= 1.18 and aws-ofi-nccl >= 1.7 need no more). NCCL_NET
# names the aws-ofi-nccl plugin, so a node without it fails instead of falling back to sockets.
export LD_LIBRARY_PATH=/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib:/opt/amazon/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NET="AWS Libfabric"
export FI_PROVIDER=efa
export FI_EFA_USE_HUGE_PAGE=0
export FI_EFA_SET_CUDA_SYNC_MEMOPS=0
export NCCL_SOCKET_IFNAME=^docker,lo,veth
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1
CONF
cat >"$NODE_ROOT/etc/llm-health/health.env" <<CONF
HEALTH_EXPECTED_GPUS=$gpus
HEALTH_EXPECTED_NEURON=0
HEALTH_EXPECTED_EFA=$efa_devices
CONF
if [[ "$pyxis" == true ]]; then
	printf 'HEALTH_USER_DIRS=%s\n' "${enroot_parents[*]}" >>"$NODE_ROOT/etc/llm-health/health.env"
fi
# Free-space checks of the shared file system and the node-local scratch, with their floors: the prolog drains a
# node below one (unset, its floors are 0 and never fail).
if [[ -n "$shared_dir" ]]; then
	printf 'HEALTH_FSX_PATH=%s\nHEALTH_MIN_FSX_FREE_GIB=%s\n' "$shared_dir" "$min_fsx_free_gib" >>"$NODE_ROOT/etc/llm-health/health.env"
fi
if [[ -n "$scratch_dir" ]]; then
	printf 'HEALTH_SCRATCH_PATH=%s\nHEALTH_MIN_SCRATCH_FREE_GIB=%s\n' "$scratch_dir" "$min_scratch_free_gib" >>"$NODE_ROOT/etc/llm-health/health.env"
fi
if [[ -n "$container_image" ]]; then
	echo "$container_image" >"$NODE_ROOT/etc/llm-cluster/container-image"
fi
# ---- 4. metrics exporters, from the release the head node laid onto shared storage ----------------
# No OnNodeConfigured argument of its own (ParallelCluster refuses changes to it): observability.sh ships with
# the release and installs what the head node staged (sha256-checked again here).
observability="$shared_dir/llm-training/cluster/bootstrap/observability.sh"
if [[ -n "$shared_dir" && -f "$observability" && -x "$shared_dir/llm-training/.venv/bin/python" ]]; then
	NODE_ROOT="$NODE_ROOT" bash "$observability" --role gpu --release "$shared_dir/llm-training" \
		--binaries "$shared_dir/llm-training.observability" --efa "$([[ "$efa_devices" -gt 0 ]] && echo true || echo false)"
elif [[ -n "$shared_dir" ]]; then
	log "metrics: no release with a Python env in $shared_dir/llm-training; exporters not installed"
fi
log "configured: $gpus GPUs, $efa_devices EFA devices, pyxis=$pyxis"
