#!/usr/bin/env bash
# OnNodeConfigured for the head node, run as root by ParallelCluster.
#
#   head_node.sh --cluster-name-tag deployment --shared-dir /fsx
#                [--payload s3://.../payload.tar.gz | --payload-parameter /<name>/cluster/head-node-payload]
#                [--python python3.11 --python-env internet|wheelhouse:<dir or s3://prefix>]
#                [--requirements requirements-node.txt] [--pyxis true]
#
# 1. Unpacks the payload (a tar.gz of training/, slurm/, spec/, cluster/, policies/, the requirements files and the
#    deployment.yaml the cluster was built from) and installs the SLURM prolog/epilog node checks where
#    ParallelCluster's slurm.conf runs them (/opt/slurm/etc/scripts/prolog.d and epilog.d, shared with
#    every compute node).
# 2. Lays the payload onto shared storage as a release, <shared-dir>/llm-training.releases/<id>, with
#    (given --python-env) its Python env in .venv: the requirements file installed from PyPI or, offline,
#    from a wheelhouse, and the release itself on the env's path. The venv is built in place because its
#    scripts name their own path; <shared-dir>/llm-training is a symlink switched to the finished release
#    in one rename, so a job never sees half a copy. The id hashes the payload and the env's inputs: a
#    rerun with the same ones rebuilds nothing. The previous release stays, and so does every release a job
#    that Slurm still holds (pending, held, running, requeued) names; the others are removed. When Slurm
#    cannot list its jobs, nothing is removed.
# 3. /etc/profile.d/llm-training.sh exports LLM_TRAINING_SPEC (the release's deployment.yaml, which
#    `python -m launch.submit` reads by default) and puts the release's commands on PATH: pyproject.toml's
#    entry points (llm-submit, llm-plan, ...) and the env's tensorboard (cluster/bootstrap/login_env.sh).
# 4. With --pyxis true: turns on the pyxis SPANK plugin (srun --container-image) with its runtime
#    path on node-local /run/pyxis.
# 5. Metrics (cluster.observability): cluster/bootstrap/observability.sh --role head from the new release.
# 6. The shared directories the runbook uses, made once: <shared-dir>/data (prepared datasets), runs (run
#    directories), containers (imported .sqsh images) and fabric-checks (`llm-fabric render`'s default output),
#    root-owned with mode 1777 like /tmp: every cluster user may create their own entries there and no user may
#    remove another's. Existing ones are left as they are. And <shared-dir>/.slurm/drain-requests (root, 1733), where a
#    job asks the epilog to drain a node of its own (cluster/health/epilog.sh).
# 7. With --python-env, where systemd runs: llm-reservation-holds.timer, which every minute releases a requeued job
#    that Slurm holds because its reservation ended (cluster/reservation_holds.py).
#
# OnNodeConfigured passes --payload-parameter, an SSM parameter (a stable key) whose value is the S3 URI of the
# current payload, so the cluster config's OnNodeConfigured never changes with the code (ParallelCluster
# refuses any change to it). OnNodeUpdated passes --payload with the new payload's URI: a code-only change
# is then a supported cluster update that re-runs this script, which builds and switches to the new release.
#
# System paths can be redirected (SLURM_ETC, PROFILE_D, PYXIS_PLUGIN) for tests; a payload or a
# wheelhouse may be a local path. A missing interpreter is installed with dnf (Amazon Linux 2023's
# repositories are reachable through the S3 endpoint) unless PYTHON_INSTALL=false.
set -euo pipefail

SLURM_ETC="${SLURM_ETC:-/opt/slurm/etc}"
PROFILE_D="${PROFILE_D:-/etc/profile.d}"
PYXIS_PLUGIN="${PYXIS_PLUGIN:-}"
PYTHON_INSTALL="${PYTHON_INSTALL:-true}"
# Slurm's client commands (ParallelCluster installs them here) and how long to wait for slurmdbd.
SLURM_BIN="${SLURM_BIN:-/opt/slurm/bin}"
# Where the head node's own timers go, and the systemctl that starts them (both redirected by tests).
SYSTEMD_DIR="${SYSTEMD_DIR:-/etc/systemd/system}"
SYSTEMCTL="${SYSTEMCTL:-systemctl}"
ACCOUNTING_WAIT_SECONDS="${ACCOUNTING_WAIT_SECONDS:-600}"
# Jobs whose release must outlive an update: every state before the end (a held job is PENDING).
LIVE_JOB_STATES="PENDING,RUNNING,SUSPENDED,CONFIGURING,COMPLETING,REQUEUED,REQUEUE_HOLD,REQUEUE_FED,RESV_DEL_HOLD,SPECIAL_EXIT,RESIZING,SIGNALING,STAGE_OUT,STOPPED"
# requirements-node.txt pins numpy 2.4 and torch 2.13, which need Python 3.11 or newer.
MINIMUM_PYTHON="3.11"

die() {
	echo "head_node: $*" >&2
	exit 1
}
log() { echo "head_node: $*" >&2; }

shared_dir="" payload="" payload_parameter="" pyxis="false" tag="" python="python3" python_env="" requirements="requirements-node.txt"
while [[ $# -gt 0 ]]; do
	[[ $# -ge 2 ]] || die "argument $1 needs a value"
	case "$1" in
	--cluster-name-tag) tag="$2" ;;
	--shared-dir) shared_dir="$2" ;;
	--payload) payload="$2" ;;
	--payload-parameter) payload_parameter="$2" ;;
	--pyxis) pyxis="$2" ;;
	--python) python="$2" ;;
	--python-env) python_env="$2" ;;
	--requirements) requirements="$2" ;;
	*) die "unknown argument $1 (expected --cluster-name-tag, --shared-dir, --payload, --payload-parameter, --python, --python-env, --requirements, --pyxis)" ;;
	esac
	shift 2
done
if [[ -n "$payload_parameter" ]]; then
	[[ -z "$payload" ]] || die "--payload and --payload-parameter exclude each other"
	payload="$(aws ssm get-parameter --name "$payload_parameter" --query Parameter.Value --output text)" ||
		die "cannot read SSM parameter $payload_parameter (the head node role needs ssm:GetParameter on it)"
	[[ -n "$payload" && "$payload" != None ]] || die "SSM parameter $payload_parameter is empty"
	log "payload $payload (from SSM parameter $payload_parameter)"
fi
[[ -z "$shared_dir" || "$shared_dir" == /* ]] || die "--shared-dir must be an absolute path, not '$shared_dir'"
[[ "$pyxis" == true || "$pyxis" == false ]] || die "--pyxis must be true or false, not '$pyxis'"
wheelhouse=""
case "$python_env" in
"" | internet) ;;
wheelhouse:?*) wheelhouse="${python_env#wheelhouse:}" ;;
*) die "--python-env must be internet or wheelhouse:<dir or s3://prefix>, not '$python_env'" ;;
esac
if [[ -n "$python_env" && (-z "$shared_dir" || -z "$payload") ]]; then
	die "--python-env $python_env needs --shared-dir and --payload (the env lives beside the training package)"
fi
[[ "$requirements" =~ ^[A-Za-z0-9._-]+$ ]] || die "--requirements must name a file at the payload's top level, not '$requirements'"
log "configuring head node (tag ${tag:-none})"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# ---- checks before anything changes ------------------------------------------------------------------
python_version=""
if [[ -n "$python_env" ]]; then
	if ! command -v "$python" >/dev/null && [[ "$PYTHON_INSTALL" == true && "$python" != */* ]] && command -v dnf >/dev/null; then
		log "installing $python with dnf"
		dnf install -y -q "$python" >&2 || true
	fi
	command -v "$python" >/dev/null || die "--python $python not found on this node: install it in the AMI (dnf install $python) or pick cluster.python_version"
	python_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" || die "--python $python does not run"
	[[ "$(printf '%s\n' "$MINIMUM_PYTHON" "$python_version" | sort -V | head -n 1)" == "$MINIMUM_PYTHON" ]] ||
		die "--python $python is Python $python_version; the training env needs $MINIMUM_PYTHON or newer"
	"$python" -c 'import venv, ensurepip' 2>/dev/null || die "--python $python has no venv/ensurepip module (install its -venv package)"
	if [[ -n "$wheelhouse" && "$wheelhouse" != s3://* ]]; then
		[[ -d "$wheelhouse" ]] || die "wheelhouse $wheelhouse not found (build it with make wheelhouse)"
		compgen -G "$wheelhouse/*.whl" >/dev/null || die "wheelhouse $wheelhouse holds no wheels (build it with make wheelhouse)"
	fi
fi

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
fi

# ---- 1b. people's accounts (cluster.users) -------------------------------------------------------------
# With cluster.users the payload carries users/accounts.sh (cluster/users.py): the spec's groups and users, with
# the same ids every compute node gives them (each runs the script from the release), homes made here (/home is
# this node's, NFS-shared with the compute nodes), sudo for the admins alone. Idempotent: OnNodeUpdated runs it again.
if [[ -n "$payload" && -f "$work/payload/users/accounts.sh" ]]; then
	CREATE_HOMES=true bash "$work/payload/users/accounts.sh" >&2 ||
		die "users/accounts.sh failed: the accounts of cluster.users are not in place (the reason is above)"
	log "the groups and users of cluster.users are in place; sudo for its admins alone"
fi

# ---- 2. the release on shared storage and its Python env ----------------------------------------
# pip's output goes to a log beside the env; a failure is reported as one line naming what is missing.
install_requirements() {
	local release="$1" pip_log="$1/.pip-install.log" source_dir="$wheelhouse"
	local pip=("$release/.venv/bin/python" -m pip --disable-pip-version-check --no-input install --progress-bar off)
	local files=(-r "$release/$requirements")
	[[ -f "$release/constraints.txt" ]] && files+=(-c "$release/constraints.txt")
	if [[ "$wheelhouse" == s3://* ]]; then
		source_dir="$release.wheelhouse"
		aws s3 sync --only-show-errors "$wheelhouse" "$source_dir" ||
			die "cannot copy wheelhouse $wheelhouse (the head node role needs s3:ListBucket and s3:GetObject on it)"
		compgen -G "$source_dir/*.whl" >/dev/null || die "wheelhouse $wheelhouse holds no wheels (build it with make wheelhouse)"
	fi
	local status=0
	if [[ -n "$wheelhouse" ]]; then
		# --isolated: the wheelhouse and nothing else, whatever pip configuration the AMI carries.
		"${pip[@]}" --isolated --no-index --find-links "$source_dir" "${files[@]}" >"$pip_log" 2>&1 || status=$?
	else
		"${pip[@]}" "${files[@]}" >"$pip_log" 2>&1 || status=$?
	fi
	[[ "$source_dir" == "$release.wheelhouse" ]] && rm -rf "$source_dir"
	[[ $status -eq 0 ]] && return 0
	local missing
	missing="$(sed -n 's/.*No matching distribution found for \([^ ]*\).*/\1/p' "$pip_log" | head -n 1)"
	if [[ -z "$missing" ]] && ! grep -q ' depends on ' "$pip_log"; then
		# With a constraint on it, pip words a package without candidates as a conflict of two equal requests.
		missing="$(sed -n 's/^ERROR: Cannot install \(.*\) because these package versions have conflicting dependencies\./\1/p' "$pip_log" | head -n 1)"
	fi
	if [[ -n "$missing" && -n "$wheelhouse" ]]; then
		die "wheelhouse $wheelhouse has no wheel of $missing for Python $python_version (rebuild it: make wheelhouse WHEELHOUSE_PYTHON=$python_version)"
	elif [[ -n "$missing" ]]; then
		die "the package index has no $missing for Python $python_version (pip log: $pip_log)"
	fi
	die "pip install -r $requirements failed: $(grep -m 1 '^ERROR' "$pip_log" || tail -n 1 "$pip_log") (pip log: $pip_log)"
}

build_env() {
	local release="$1"
	[[ -f "$release/$requirements" ]] || die "payload $payload lacks $requirements"
	"$python" -m venv "$release/.venv" || die "$python -m venv $release/.venv failed"
	install_requirements "$release"
	# The release's packages (training, slurm, spec, cluster, policies) on the env's path, without an install step.
	local site
	site="$("$release/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
	echo "$release" >"$site/llm-training.pth"
	(cd / && "$release/.venv/bin/python" -I -c 'import launch.submit') ||
		die "the new env in $release/.venv cannot import launch.submit"
	# The release's commands: pyproject.toml's entry points (llm-submit, llm-plan, ...) and the env's own tools the
	# runbook uses here (tensorboard), in $release/bin (cluster/bootstrap/login_env.sh, from the release itself).
	bash "$release/cluster/bootstrap/login_env.sh" launchers "$release"
	log "Python $python_version env built in $release/.venv from ${wheelhouse:-the package index} ($requirements)"
}

# Releases that a job Slurm still holds (pending, held, running, requeued) names: its batch script, command or working
# directory pins <releases>/<id> (llm-submit renders the release's real path into WORKDIR, PYTHON and TORCHRUN).
# Prints "<id> <job id>" lines; fails when Slurm cannot answer, so the caller deletes nothing on a guess.
releases_in_use() {
	local releases="$1" jobs job
	# A controller that does not answer within a minute is no answer (the update must not hang on it).
	local -a slurm=(env "PATH=$SLURM_BIN:$PATH" timeout 60)
	jobs="$("${slurm[@]}" squeue --all --noheader --states="$LIVE_JOB_STATES" --format=%A)" || return 1
	for job in $jobs; do
		{
			"${slurm[@]}" squeue --noheader --jobs="$job" --format='%Z %o' 2>/dev/null || true
			"${slurm[@]}" scontrol write batch_script "$job" - 2>/dev/null || true
		} | grep -o "$releases/[0-9a-f]\{16\}" | sed "s|^$releases/||;s|\$| $job|" || true
	done
}

# Removes every release but the new one, the previous one (jobs submitted just before the switch) and those a live
# job names; keeps them all when Slurm cannot say which are used.
prune_releases() {
	local releases="$1" id="$2" previous="$3" used old name
	if ! used="$(releases_in_use "$releases")"; then
		log "Slurm cannot list its jobs (squeue failed or timed out): every release in $releases kept"
		return 0
	fi
	for old in "$releases"/*; do
		name="$(basename "$old")"
		[[ "$name" == "$id" || "$name" == "$previous" ]] && continue
		if grep -q "^$name " <<<"$used"; then
			log "release $name kept: job(s) $(grep "^$name " <<<"$used" | cut -d' ' -f2 | sort -un | paste -sd, -) use it"
			continue
		fi
		rm -rf "$old"
	done
}

if [[ -n "$payload" && -n "$shared_dir" ]]; then
	for package in training launch planner; do
		[[ -d "$work/payload/$package" ]] || die "payload $payload lacks $package/"
	done
	[[ -f "$work/payload/cluster/bootstrap/login_env.sh" ]] || die "payload $payload lacks cluster/bootstrap/login_env.sh"
	[[ -f "$work/payload/deployment.yaml" ]] || log "payload $payload has no deployment.yaml; the submit command falls back to spec/default.yaml"
	dest="$shared_dir/llm-training"
	releases="$shared_dir/llm-training.releases"
	id="$({
		sha256sum <"$work/payload.tar.gz"
		echo "$python_env $requirements ${python_env:+$("$python" -c 'import sys; print(sys.version)')}"
	} | sha256sum | cut -c 1-16)"
	release="$releases/$id"
	mkdir -p "$releases"
	if [[ -f "$release/.complete" ]]; then
		log "release $id is already built in $release"
	else
		rm -rf "$release" "$release.wheelhouse"
		mkdir "$release"
		cp -a "$work/payload/." "$release/"
		[[ -n "$python_env" ]] && build_env "$release"
		chmod -R a+rX "$release"
		touch "$release/.complete"
	fi
	previous=""
	if [[ -L "$dest" ]]; then
		previous="$(basename "$(readlink "$dest")")"
	elif [[ -e "$dest" ]]; then
		mv "$dest" "$dest.old.$$" # a plain directory from an earlier layout: replaced once, then symlinks
	fi
	ln -sfn "llm-training.releases/$id" "$dest.link.$$"
	mv -T "$dest.link.$$" "$dest"
	rm -rf "$dest.old.$$"
	if [[ "$previous" != "$id" ]]; then # a rerun of the live release keeps what the last switch kept
		prune_releases "$releases" "$id" "$previous"
	fi
	log "training package laid out in $dest -> $release"

	# ---- 3. login environment ------------------------------------------------------------------------
	bash "$dest/cluster/bootstrap/login_env.sh" profile "$dest" "$PROFILE_D"
	log "login environment in $PROFILE_D/llm-training.sh"
fi

# ---- 6. shared directories ----------------------------------------------------------------------------
if [[ -n "$shared_dir" ]]; then
	for name in data runs containers fabric-checks; do
		if [[ ! -e "$shared_dir/$name" ]]; then
			install -d -o root -g root -m 1777 "$shared_dir/$name"
			log "created $shared_dir/$name (root, 1777: users add their own entries)"
		fi
	done
	# The spool of jobs' drain requests that the epilog (root) reads, cluster/health/epilog.sh: root's, sticky, and
	# writable but not listable by users (1733); made so on every run, the epilog trusts nothing else.
	install -d -o root -g root -m 0755 "$shared_dir/.slurm"
	install -d -o root -g root -m 1733 "$shared_dir/.slurm/drain-requests"
	log "drain-request spool $shared_dir/.slurm/drain-requests (root, 1733: the epilog drains a job's own nodes on request)"
fi

# ---- 5. metrics: exporters and the Prometheus agent (cluster/bootstrap/observability.sh) -----------------
# The pinned upstream binaries come from the wheelhouse's observability/ prefix (make observability-binaries) and
# are staged on shared storage for the compute nodes. Only where systemd runs (not in a test's fake root).
if [[ -n "$payload" && -n "$shared_dir" && -n "$python_env" && -f "$dest/cluster/bootstrap/observability.sh" ]]; then
	if [[ -z "$wheelhouse" ]]; then
		log "metrics: no wheelhouse, so no offline source of the exporters' binaries; skipped (docs/observability.md)"
	elif [[ ! -d /run/systemd/system && -z "${OBSERVABILITY_NODE_ROOT:-}" ]]; then
		log "metrics: systemd is not running on this host; skipped"
	else
		NODE_ROOT="${OBSERVABILITY_NODE_ROOT:-}" bash "$dest/cluster/bootstrap/observability.sh" \
			--role head --release "$dest" --binaries "${wheelhouse%/}/observability" --stage "$shared_dir/llm-training.observability"
	fi
fi

# ---- 7. requeued jobs held by an ended reservation (cluster/reservation_holds.py) ------------------------------
# Every minute, as root, from the live release's env: a job requeued into a reservation that then ended (a Capacity
# Block's end) runs again outside it instead of waiting held. Only where systemd runs (or tests redirect it).
if [[ -n "$payload" && -n "$shared_dir" && -n "$python_env" ]] && [[ -d /run/systemd/system || "$SYSTEMD_DIR" != /etc/systemd/system ]]; then
	install -d -m 0755 "$SYSTEMD_DIR"
	cat >"$SYSTEMD_DIR/llm-reservation-holds.service" <<EOF
[Unit]
Description=Run again requeued Slurm jobs held by an ended reservation (cluster/reservation_holds.py)
After=slurmctld.service

[Service]
Type=oneshot
Environment=PATH=$SLURM_BIN:/usr/bin:/bin
WorkingDirectory=$dest
ExecStart=$dest/.venv/bin/python -m cluster.reservation_holds
EOF
	cat >"$SYSTEMD_DIR/llm-reservation-holds.timer" <<EOF
[Unit]
Description=Every minute: requeued Slurm jobs held by an ended reservation

[Timer]
OnBootSec=2min
OnUnitActiveSec=1min
AccuracySec=10s

[Install]
WantedBy=timers.target
EOF
	"$SYSTEMCTL" daemon-reload
	"$SYSTEMCTL" enable --now llm-reservation-holds.timer
	log "llm-reservation-holds.timer: every minute, requeued jobs held by an ended reservation run again outside it"
fi

# ---- 4. pyxis ------------------------------------------------------------------------------------
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

# ---- 5. Slurm accounting -------------------------------------------------------------------------
# With cluster.accounting the payload carries accounting/sacctmgr.sh (cluster.accounting, rendered from the
# spec): QoS, accounts and users. ParallelCluster configures and starts slurmdbd before OnNodeConfigured;
# wait until it answers, then converge the database on the spec (the script is idempotent: OnNodeUpdated
# runs it again with the updated spec).
if [[ -n "$payload" && -f "$work/payload/accounting/sacctmgr.sh" ]]; then
	export PATH="$SLURM_BIN:$PATH"
	deadline=$((SECONDS + ACCOUNTING_WAIT_SECONDS))
	until sacctmgr --noheader --parsable2 show cluster format=cluster >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "slurmdbd did not answer within ${ACCOUNTING_WAIT_SECONDS} s (sacctmgr show cluster); see /var/log/slurmdbd.log"
		sleep 5
	done
	bash "$work/payload/accounting/sacctmgr.sh" || die "accounting/sacctmgr.sh failed: the accounts and QoS of cluster.accounting are not in place"
	log "Slurm accounts, users and QoS match cluster.accounting"
fi
