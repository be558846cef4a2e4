#!/usr/bin/env bash
# Metrics on a node: the pinned exporters as systemd units, and on the head node the Prometheus agent that
# scrapes the nodes Slurm knows and remote-writes to Amazon Managed Service for Prometheus (docs/observability.md).
#
#   observability.sh --role head|gpu|trn1|cpu --release /fsx/llm-training --binaries DIR|s3://prefix
#                    [--efa true|false] [--stage DIR]
#
# Run by head_node.sh (role head) and by gpu_node.sh/trn1_node.sh from the release on shared storage, so no
# OnNodeConfigured argument changes. --binaries holds the upstream files named in cluster/observability/binaries.json
# (staged by `make observability-binaries`); each is installed only if its sha256 matches the manifest. The head
# node copies the verified files to --stage (shared storage) for the compute nodes. The Python exporters run from
# the release's env (<release>/.venv). The remote-write URL comes from the SSM parameter the stack writes
# (spec.observability.remote_write_parameter); without it the agent is not started.
#
# NODE_ROOT (prefix of every system path), SYSTEMCTL, AWS and OBSERVABILITY_MANIFEST can be redirected for tests.
set -euo pipefail

NODE_ROOT="${NODE_ROOT:-}"
SYSTEMCTL="${SYSTEMCTL:-systemctl}"
AWS="${AWS:-aws}"

die() {
	echo "observability: $*" >&2
	exit 1
}
log() { echo "observability: $*" >&2; }

role="" release="" binaries="" efa="false" stage=""
while [[ $# -gt 0 ]]; do
	[[ $# -ge 2 ]] || die "argument $1 needs a value"
	case "$1" in
	--role) role="$2" ;;
	--release) release="$2" ;;
	--binaries) binaries="$2" ;;
	--efa) efa="$2" ;;
	--stage) stage="$2" ;;
	*) die "unknown argument $1 (expected --role, --release, --binaries, --efa, --stage)" ;;
	esac
	shift 2
done
[[ "$role" =~ ^(head|gpu|trn1|cpu)$ ]] || die "--role must be head, gpu, trn1 or cpu, not '$role'"
[[ "$efa" == true || "$efa" == false ]] || die "--efa must be true or false, not '$efa'"
[[ -n "$binaries" ]] || die "--binaries is required (a directory or s3:// prefix of the pinned upstream files)"
python="$release/.venv/bin/python"
[[ -x "$python" ]] || die "$python not found: the release on shared storage has no Python env (head_node.sh --python-env)"
spec="$release/deployment.yaml"
[[ -f "$spec" ]] || die "$spec not found"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
units() { (cd "$release" && "$python" -E -m cluster.observability.units --spec "$spec" --role "$role" --release "$release" "$@"); }
read -r enabled _ < <(units --print-settings)
if [[ "$enabled" != true ]]; then
	log "cluster.observability.enabled is false in $spec: nothing to do"
	exit 0
fi

# ---- 1. the pinned binaries, checked against the manifest ------------------------------------------------
# An entry without a pinned sha256 is skipped with a warning (its unit is not written), never installed unchecked.
install_root="$NODE_ROOT/opt/llm-observability"
installed=()
while read -r name version file sha256 binary use; do
	[[ "$use" == install || -n "$stage" ]] || continue
	if [[ "$sha256" == - ]]; then
		log "WARNING: $name $version has no sha256 in cluster/observability/binaries.json: not installed (pin it)"
		continue
	fi
	fetched=true
	case "$binaries" in
	s3://*) "$AWS" s3 cp --only-show-errors "${binaries%/}/$file" "$work/$file" 2>/dev/null || fetched=false ;;
	*) cp "$binaries/$file" "$work/$file" 2>/dev/null || fetched=false ;;
	esac
	if [[ "$fetched" == false ]]; then
		log "WARNING: ${binaries%/}/$file not found: $name not installed (make observability-binaries stages it)"
		continue
	fi
	echo "$sha256  $work/$file" | sha256sum --check --quiet --status ||
		die "$file: sha256 $(sha256sum "$work/$file" | cut -d' ' -f1) is not the pinned $sha256"
	if [[ -n "$stage" ]]; then
		install -d -m 0755 "$stage"
		install -m 0644 "$work/$file" "$stage/$file"
	fi
	[[ "$use" == install ]] || continue
	dest="$install_root/$name-$version"
	install -d -m 0755 "$dest"
	# A release tarball or a Debian package: the standard library unpacks both (no dpkg on Amazon Linux).
	(cd "$release" && "$python" -E -m cluster.observability.archive "$work/$file" "$binary" "$dest") >/dev/null
	installed+=("$name")
	log "$name $version installed in $dest (sha256 verified)"
done < <(units --print-binaries)

# ---- 2. the head node's agent config -----------------------------------------------------------------
url=""
if [[ "$role" == head ]]; then
	install -d -m 0755 "$NODE_ROOT/etc/llm-prometheus" "$NODE_ROOT/var/lib/llm-prometheus/targets"
	read -r _ parameter region < <(units --print-settings)
	url="$("$AWS" ssm get-parameter --region "$region" --name "$parameter" --query Parameter.Value --output text 2>/dev/null || true)"
	if [[ -z "$url" || "$url" == None ]]; then
		log "no remote-write URL in SSM parameter $parameter: exporters only, no agent (cluster.observability.managed_prometheus)"
		url=""
	fi
	(cd "$release" && "$python" -E -m cluster.observability.agent_config --spec "$spec" \
		--targets-dir /var/lib/llm-prometheus/targets ${url:+--remote-write-url "$url"} \
		--out "$NODE_ROOT/etc/llm-prometheus/prometheus.yml") || die "cannot render the agent config"
fi

# ---- 3. systemd units ------------------------------------------------------------------------------
install -d -m 0755 "$NODE_ROOT/etc/systemd/system"
remote_write=false
[[ "$role" == head && -n "$url" ]] && remote_write=true
mapfile -t written < <(units --efa "$efa" --installed "$(
	IFS=,
	echo "${installed[*]}"
)" --remote-write "$remote_write" --out "$NODE_ROOT/etc/systemd/system")
"$SYSTEMCTL" daemon-reload
"$SYSTEMCTL" enable --now "${written[@]}"
log "$role: started ${written[*]}"
