#!/usr/bin/env bash
# OnNodeConfigured for the head node, run as root by ParallelCluster.
#
#   head_node.sh --cluster-name-tag deployment --shared-dir /fsx [--payload s3://.../payload.tar.gz] [--pyxis true]
#
# 1. Unpacks the payload (a tar.gz holding cluster/health/ and training/) and installs the SLURM
#    prolog/epilog node checks where ParallelCluster's slurm.conf runs them
#    (/opt/slurm/etc/scripts/prolog.d and epilog.d, shared with every compute node).
# 2. Lays the training package onto shared storage (<shared-dir>/llm-training), swapped in whole so
#    a job never sees half a copy.
# 3. With --pyxis true: turns on the pyxis SPANK plugin (srun --container-image) with its runtime
#    path on node-local /run/pyxis.
#
# System paths can be redirected (SLURM_ETC, PYXIS_PLUGIN) for tests; a payload may be a local path.
set -euo pipefail

SLURM_ETC="${SLURM_ETC:-/opt/slurm/etc}"
PYXIS_PLUGIN="${PYXIS_PLUGIN:-}"

die() {
	echo "head_node: $*" >&2
	exit 1
}
log() { echo "head_node: $*" >&2; }

shared_dir="" payload="" pyxis="false" tag=""
while [[ $# -gt 0 ]]; do
	[[ $# -ge 2 ]] || die "argument $1 needs a value"
	case "$1" in
	--cluster-name-tag) tag="$2" ;;
	--shared-dir) shared_dir="$2" ;;
	--payload) payload="$2" ;;
	--pyxis) pyxis="$2" ;;
	*) die "unknown argument $1 (expected --cluster-name-tag, --shared-dir, --payload, --pyxis)" ;;
	esac
	shift 2
done
[[ -z "$shared_dir" || "$shared_dir" == /* ]] || die "--shared-dir must be an absolute path, not '$shared_dir'"
[[ "$pyxis" == true || "$pyxis" == false ]] || die "--pyxis must be true or false, not '$pyxis'"
log "configuring head node (tag ${tag:-none})"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# ---- 1. payload and SLURM node checks -----------------------------------------------------------
if [[ -n "$payload" ]]; then
	case "$payload" in
	s3://*) aws s3 cp --quiet "$payload" "$work/payload.tar.gz" ;;
	*) cp "$payload" "$work/payload.tar.gz" ;;
	esac
	mkdir "$work/payload"
	tar -xzf "$work/payload.tar.gz" -C "$work/payload"
	health="$work/payload/cluster/health"
	for script in prolog.sh epilog.sh lib.sh; do
		[[ -f "$health/$script" ]] || die "payload $payload lacks cluster/health/$script"
	done
	checks="$SLURM_ETC/scripts/llm-health"
	install -d -m 0755 "$checks" "$SLURM_ETC/scripts/prolog.d" "$SLURM_ETC/scripts/epilog.d"
	install -m 0755 "$health/prolog.sh" "$health/epilog.sh" "$checks/"
	install -m 0644 "$health/lib.sh" "$checks/"
	for phase in prolog epilog; do
		printf '#!/usr/bin/env bash\n# Installed by head_node.sh: node health checks (cluster/health).\nexec %s/%s.sh "$@"\n' \
			"$checks" "$phase" >"$SLURM_ETC/scripts/$phase.d/90-llm-health.sh"
		chmod 0755 "$SLURM_ETC/scripts/$phase.d/90-llm-health.sh"
	done
	log "SLURM prolog/epilog checks installed in $checks"

	# ---- 2. training package on shared storage --------------------------------------------------
	if [[ -n "$shared_dir" ]]; then
		[[ -d "$work/payload/training" ]] || die "payload $payload lacks training/"
		dest="$shared_dir/llm-training"
		staging="$dest.new.$$"
		rm -rf "$staging"
		mkdir -p "$staging"
		cp -a "$work/payload/training" "$staging/"
		[[ -d "$work/payload/cluster" ]] && cp -a "$work/payload/cluster" "$staging/"
		if [[ -e "$dest" ]]; then
			mv "$dest" "$dest.old.$$"
		fi
		mv "$staging" "$dest"
		rm -rf "$dest.old.$$"
		chmod -R a+rX "$dest"
		log "training package laid out in $dest"
	fi
fi

# ---- 3. pyxis ------------------------------------------------------------------------------------
if [[ "$pyxis" == true ]]; then
	plugin="$PYXIS_PLUGIN"
	if [[ -z "$plugin" ]]; then
		plugin="$(find /usr/local/lib /usr/lib64 /usr/lib /opt/slurm/lib -name spank_pyxis.so -print -quit 2>/dev/null || true)"
	fi
	[[ -n "$plugin" && -f "$plugin" ]] || die "spank_pyxis.so not found: this AMI has no pyxis (ParallelCluster AMIs ship it from 3.11)"
	install -d -m 0755 "$SLURM_ETC/plugstack.conf.d"
	echo "include $SLURM_ETC/plugstack.conf.d/*" >"$SLURM_ETC/plugstack.conf"
	echo "required $plugin runtime_path=/run/pyxis" >"$SLURM_ETC/plugstack.conf.d/pyxis.conf"
	log "pyxis enabled ($plugin, runtime on node-local /run/pyxis)"
fi
