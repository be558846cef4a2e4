#!/usr/bin/env bash
# OnNodeConfigured for Trainium queues (trn1/trn1n), run as root by ParallelCluster.
#
#   trn1_node.sh --neuron-sdk 2.26.1 --pins aws-neuronx-dkms=2.24.7.0,... --devices 16 \
#                --efa-devices 8 --compile-cache /fsx/neuron-cache --offline true \
#                [--installer s3://bucket/bootstrap/neuron_install.sh]
#                [--nxdt-wheelhouse s3://bucket/nxdt/2.26.1/ [--nxdt-installer s3://bucket/bootstrap/nxdt_install.sh]]
#
# 1. Neuron packages at the spec's pins. Offline nodes (no internet egress) cannot install anything:
#    the pins must already be in the AMI (cluster/bootstrap/neuron-image.yaml), and a mismatch fails
#    the bootstrap with the package named. Nodes with egress install the pins (neuron_install.sh).
#    The NxDT stack (NxDT, NxD, NeMo, Lightning, hydra, megatron-core, apex) is in the AMI (image_config
#    --nxdt-wheelhouse) or, given --nxdt-wheelhouse, installed here from that S3 mirror without any index
#    (nxdt_install.sh); either way it must sit on the same torch-neuronx and neuronx-cc as the pins.
# 2. Sanity: Neuron devices and EFA devices match the facts table.
# 3. Compile cache on shared storage (every node reuses compiled graphs), job environment, health settings.
# 4. What NxDT's own launch scripts do as root before a run (examples/train_setup.sh): reserve the rendezvous
#    port (--master-port, the jobs' default 41000) so no ephemeral connection takes it, and cap each Lustre
#    client connection's dirty cache (osc.*.max_dirty_mb=64) so checkpoint writes cannot exhaust host memory.
#
# System paths and tools can be redirected (NODE_ROOT, SYSFS_ROOT, DEV_ROOT, NEURON_VENV, INSTALLED_VERSION,
# SYSCTL, LCTL) for tests.
set -euo pipefail

NODE_ROOT="${NODE_ROOT:-}"
SYSFS_ROOT="${SYSFS_ROOT:-/sys}"
DEV_ROOT="${DEV_ROOT:-/dev}"
NEURON_VENV="${NEURON_VENV:-/opt/neuron-venv}"
SYSCTL="${SYSCTL:-sysctl}"
LCTL="${LCTL:-lctl}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() {
	echo "trn1_node: $*" >&2
	exit 1
}
log() { echo "trn1_node: $*" >&2; }

# The installed version of a system or Python package, or nothing.
installed_version() {
	local name="$1"
	if [[ -n "${INSTALLED_VERSION:-}" ]]; then
		"$INSTALLED_VERSION" "$name"
	elif [[ "$name" == torch-neuronx || "$name" == neuronx-cc ]]; then
		"$NEURON_VENV/bin/pip" show "$name" 2>/dev/null | sed -n 's/^Version: //p'
	elif command -v dpkg-query >/dev/null; then
		dpkg-query -W -f='${Version}' "$name" 2>/dev/null || true
	else
		rpm -q --qf '%{VERSION}' "$name" 2>/dev/null || true
	fi
}

# ParallelCluster downloads only this script; a script it runs comes beside it (tests, AMI) or from S3.
companion_script() {
	local name="$1" option="$2" uri="$3" path
	if [[ -f "$HERE/$name" ]]; then
		echo "$HERE/$name"
		return
	fi
	[[ -n "$uri" ]] || die "$name is not beside this script and no $option URI was given"
	path="$(mktemp)"
	aws s3 cp --quiet "$uri" "$path" || die "cannot copy $uri"
	echo "$path"
}

nxdt_wheelhouse="" nxdt_installer=""
sdk="" pins="" devices="" efa_devices="" compile_cache="" offline="true" installer="" shared_dir="" scratch_dir="" master_port=41000
# The prolog's free-space floors, GiB (the config builder derives them from the spec: cluster.stop_save).
min_fsx_free_gib=100 min_scratch_free_gib=20
while [[ $# -gt 0 ]]; do
	[[ $# -ge 2 ]] || die "argument $1 needs a value"
	case "$1" in
	--neuron-sdk) sdk="$2" ;;
	--pins) pins="$2" ;;
	--devices) devices="$2" ;;
	--efa-devices) efa_devices="$2" ;;
	--compile-cache) compile_cache="$2" ;;
	--offline) offline="$2" ;;
	--installer) installer="$2" ;;
	--shared-dir) shared_dir="$2" ;;
	--scratch-dir) scratch_dir="$2" ;;
	--min-fsx-free-gib) min_fsx_free_gib="$2" ;;
	--min-scratch-free-gib) min_scratch_free_gib="$2" ;;
	--master-port) master_port="$2" ;;
	--nxdt-wheelhouse) nxdt_wheelhouse="$2" ;;
	--nxdt-installer) nxdt_installer="$2" ;;
	*) die "unknown argument $1 (expected --neuron-sdk, --pins, --devices, --efa-devices, --compile-cache, --offline, --installer, --shared-dir, --scratch-dir, --min-fsx-free-gib, --min-scratch-free-gib, --master-port, --nxdt-wheelhouse, --nxdt-installer)" ;;
	esac
	shift 2
done
[[ -n "$sdk" && -n "$pins" ]] || die "--neuron-sdk and --pins are required"
[[ "$devices" =~ ^[0-9]+$ ]] || die "--devices must be a whole number, not '$devices'"
[[ "$efa_devices" =~ ^[0-9]+$ ]] || die "--efa-devices must be a whole number, not '$efa_devices'"
[[ "$compile_cache" == /* ]] || die "--compile-cache must be an absolute path, not '$compile_cache'"
[[ "$offline" == true || "$offline" == false ]] || die "--offline must be true or false, not '$offline'"
[[ -z "$shared_dir" || "$shared_dir" == /* ]] || die "--shared-dir must be an absolute path, not '$shared_dir'"
[[ -z "$scratch_dir" || "$scratch_dir" == /* ]] || die "--scratch-dir must be an absolute path, not '$scratch_dir'"
[[ "$min_fsx_free_gib" =~ ^[0-9]+$ ]] || die "--min-fsx-free-gib must be a whole number of GiB, not '$min_fsx_free_gib'"
[[ "$min_scratch_free_gib" =~ ^[0-9]+$ ]] || die "--min-scratch-free-gib must be a whole number of GiB, not '$min_scratch_free_gib'"
[[ -z "$nxdt_wheelhouse" || "$nxdt_wheelhouse" == s3://* || "$nxdt_wheelhouse" == /* ]] ||
	die "--nxdt-wheelhouse must be an S3 prefix or an absolute path, not '$nxdt_wheelhouse'"
if [[ ! "$master_port" =~ ^[0-9]+$ ]] || ((master_port < 1 || master_port > 65535)); then
	die "--master-port must be a TCP port, not '$master_port'"
fi

# ---- people's accounts (cluster.users), from the release the head node laid onto shared storage ----------
# The same groups and users, with the same ids, as the head node (cluster/users.py): ownership on /fsx is one person
# on every node, and sudo is the admins' alone. No homes here: /home is the head node's, NFS-shared.
accounts="$shared_dir/llm-training/users/accounts.sh"
if [[ -n "$shared_dir" && -f "$accounts" ]]; then
	ACCOUNTS_ROOT="$NODE_ROOT" bash "$accounts" >&2 ||
		die "$accounts failed: the accounts of cluster.users are not in place (the reason is above)"
fi

# ---- 1. pinned Neuron packages ------------------------------------------------------------------
mismatches=()
IFS=',' read -r -a pairs <<<"$pins"
for pair in "${pairs[@]}"; do
	name="${pair%%=*}" want="${pair#*=}"
	have="$(installed_version "$name")"
	# Repository versions may carry a suffix (2.28.23.0-1a2b3c4d); the pin is the prefix.
	if [[ "$have" != "$want" && "$have" != "$want"[-+.~]* ]]; then
		mismatches+=("$name ${have:-missing} (pinned $want)")
	fi
done
if [[ ${#mismatches[@]} -gt 0 ]]; then
	if [[ "$offline" == true ]]; then
		die "Neuron SDK $sdk not in this AMI: ${mismatches[*]}; without internet egress rebuild the AMI from cluster/bootstrap/neuron-image.yaml"
	fi
	log "installing Neuron SDK $sdk: ${mismatches[*]}"
	install_script="$(companion_script neuron_install.sh --installer "$installer")"
	NEURON_PINS="$pins" NEURON_VENV="$NEURON_VENV" bash "$install_script"
fi

# ---- 1b. the NxDT stack, on the pinned compiler and framework ------------------------------------
nxdt_marker="$NODE_ROOT$NEURON_VENV/nxdt-stack.txt"
if [[ ! -f "$nxdt_marker" && -n "$nxdt_wheelhouse" ]]; then
	log "installing the NxDT stack from $nxdt_wheelhouse"
	nxdt_script="$(companion_script nxdt_install.sh --nxdt-installer "$nxdt_installer")"
	NXDT_WHEELHOUSE="$nxdt_wheelhouse" NEURON_VENV="$NODE_ROOT$NEURON_VENV" bash "$nxdt_script"
fi
if [[ -f "$nxdt_marker" ]]; then
	for name in torch-neuronx neuronx-cc; do
		want="$(tr ',' '\n' <<<"$pins" | sed -n "s/^$name=//p")"
		have="$(sed -n "s/^$name==//p" "$nxdt_marker")"
		[[ -z "$want" || "$have" == "$want" ]] ||
			die "the NxDT stack in $NEURON_VENV was built for $name ${have:-unpinned}, the pins say $want; rebuild it (make nxdt-wheelhouse)"
	done
	grep -q '^neuronx-distributed-training==' "$nxdt_marker" || die "$nxdt_marker names no neuronx-distributed-training"
else
	log "no NxDT stack in $NEURON_VENV: Neuron training jobs cannot start here (bake it into the AMI or pass --nxdt-wheelhouse)"
fi

# ---- 2. device sanity ---------------------------------------------------------------------------
found_devices=$(find "$DEV_ROOT" -maxdepth 1 -name 'neuron[0-9]*' | grep -c . || true)
[[ "$found_devices" -eq "$devices" ]] || die "found $found_devices Neuron devices in $DEV_ROOT, expected $devices; replace this node"
found_efa=0
if [[ -d "$SYSFS_ROOT/class/infiniband" ]]; then
	found_efa=$(find "$SYSFS_ROOT/class/infiniband" -mindepth 1 -maxdepth 1 | grep -c . || true)
fi
[[ "$found_efa" -eq "$efa_devices" ]] || die "found $found_efa EFA devices in $SYSFS_ROOT/class/infiniband, expected $efa_devices"

# ---- 3. compile cache, job environment, health settings -----------------------------------------
install -d -m 1777 "$NODE_ROOT$compile_cache"
install -d -m 0755 "$NODE_ROOT/etc/profile.d" "$NODE_ROOT/etc/llm-health"
cat >"$NODE_ROOT/etc/profile.d/llm-neuron.sh" <<CONF
# Written by trn1_node.sh for Neuron SDK $sdk.
export PATH="$NEURON_VENV/bin:/opt/aws/neuron/bin:\$PATH"
export NEURON_COMPILE_CACHE_URL="$compile_cache"
export FI_PROVIDER=efa
export FI_EFA_USE_DEVICE_RDMA=1
export FI_EFA_FORK_SAFE=1
export MALLOC_ARENA_MAX=128
CONF
cat >"$NODE_ROOT/etc/llm-health/health.env" <<CONF
HEALTH_EXPECTED_GPUS=0
HEALTH_EXPECTED_NEURON=$devices
HEALTH_EXPECTED_EFA=$efa_devices
CONF
# Free-space checks of the shared file system and the node-local scratch, with their floors: the prolog drains a
# node below one (unset, its floors are 0 and never fail).
if [[ -n "$shared_dir" ]]; then
	printf 'HEALTH_FSX_PATH=%s\nHEALTH_MIN_FSX_FREE_GIB=%s\n' "$shared_dir" "$min_fsx_free_gib" >>"$NODE_ROOT/etc/llm-health/health.env"
fi
if [[ -n "$scratch_dir" ]]; then
	printf 'HEALTH_SCRATCH_PATH=%s\nHEALTH_MIN_SCRATCH_FREE_GIB=%s\n' "$scratch_dir" "$min_scratch_free_gib" >>"$NODE_ROOT/etc/llm-health/health.env"
fi
# ---- 4. rendezvous port and Lustre client, as NxDT's launch scripts set them ----------------------
"$SYSCTL" -w "net.ipv4.ip_local_reserved_ports=$master_port" >/dev/null ||
	die "could not reserve port $master_port (sysctl net.ipv4.ip_local_reserved_ports)"
if command -v "$LCTL" >/dev/null; then
	"$LCTL" set_param 'osc.*.max_dirty_mb=64' >/dev/null || log "lctl set_param osc.*.max_dirty_mb=64 failed; Lustre keeps its default"
else
	log "no lctl (no Lustre client): Lustre tuning skipped"
fi

# ---- 5. metrics exporters, from the release the head node laid onto shared storage ----------------
# No OnNodeConfigured argument of its own (ParallelCluster refuses changes to it): observability.sh ships with
# the release; neuron-monitor's Prometheus endpoint comes with the Neuron tools installed above.
observability="$shared_dir/llm-training/cluster/bootstrap/observability.sh"
if [[ -n "$shared_dir" && -f "$observability" && -x "$shared_dir/llm-training/.venv/bin/python" ]]; then
	NODE_ROOT="$NODE_ROOT" bash "$observability" --role trn1 --release "$shared_dir/llm-training" \
		--binaries "$shared_dir/llm-training.observability" --efa "$([[ "$efa_devices" -gt 0 ]] && echo true || echo false)"
elif [[ -n "$shared_dir" ]]; then
	log "metrics: no release with a Python env in $shared_dir/llm-training; exporters not installed"
fi

log "configured: Neuron SDK $sdk, $devices devices, $efa_devices EFA devices, cache $compile_cache"
