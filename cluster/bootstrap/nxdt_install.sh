#!/usr/bin/env bash
# Install the NeuronX Distributed Training (NxDT) stack into NEURON_VENV from a wheelhouse, without any
# package index: the wheelhouse (a directory or an S3 prefix the instance role can read) is what
# `make nxdt-wheelhouse` built from Neuron's pip repository and PyPI, megatron-core and the slim apex included.
#
#   NXDT_WHEELHOUSE=s3://bucket/nxdt/2.26.1/ NEURON_VENV=/opt/neuron-venv nxdt_install.sh
#
# The wheelhouse carries nxdt-requirements.txt (the spec's pins), nxdt-constraints.txt (every wheel in it,
# name==version) and nxdt-patches.tsv (NeMo lines NxDT's install_setup.sh removes with sed). Run in the AMI
# build (cluster/image_config.py) or by trn1_node.sh; a node without internet egress can run it (S3 only).
set -euo pipefail

NXDT_WHEELHOUSE="${NXDT_WHEELHOUSE:-${1:-}}"
NEURON_VENV="${NEURON_VENV:-/opt/neuron-venv}"
NEURON_PYTHON="${NEURON_PYTHON:-python3}"

die() {
	echo "nxdt_install: $*" >&2
	exit 1
}

[[ -n "$NXDT_WHEELHOUSE" ]] || die "NXDT_WHEELHOUSE is empty: pass the wheelhouse directory or S3 prefix (make nxdt-wheelhouse)"
source_dir="$NXDT_WHEELHOUSE"
cleanup=""
if [[ "$NXDT_WHEELHOUSE" == s3://* ]]; then
	source_dir="$(mktemp -d)"
	cleanup="$source_dir"
	aws s3 sync --only-show-errors "$NXDT_WHEELHOUSE" "$source_dir" ||
		die "cannot copy $NXDT_WHEELHOUSE (the instance role needs s3:ListBucket and s3:GetObject on it)"
fi
# shellcheck disable=SC2064  # expand now: the directory to remove is known here
[[ -n "$cleanup" ]] && trap "rm -rf '$cleanup'" EXIT
[[ -d "$source_dir" ]] || die "wheelhouse $NXDT_WHEELHOUSE not found (build it with make nxdt-wheelhouse)"
for file in nxdt-requirements.txt nxdt-constraints.txt nxdt-patches.tsv; do
	[[ -f "$source_dir/$file" ]] || die "wheelhouse $NXDT_WHEELHOUSE has no $file (build it with make nxdt-wheelhouse)"
done

[[ -x "$NEURON_VENV/bin/python" ]] || "$NEURON_PYTHON" -m venv "$NEURON_VENV" || die "cannot create $NEURON_VENV with $NEURON_PYTHON"
pip_log="$(mktemp)"
# --isolated: the wheelhouse and nothing else, whatever pip configuration the image carries.
if ! "$NEURON_VENV/bin/python" -m pip install --isolated --disable-pip-version-check --no-input --no-index \
	--find-links "$source_dir" -r "$source_dir/nxdt-requirements.txt" -c "$source_dir/nxdt-constraints.txt" \
	>"$pip_log" 2>&1; then
	tail -n 20 "$pip_log" >&2
	die "pip could not install the NxDT stack from $NXDT_WHEELHOUSE (rebuild it with make nxdt-wheelhouse for this Python)"
fi
rm -f "$pip_log"

# Every exact pin installed at its version (the constraints could not have let another in, but a wheelhouse
# built for another spec could lack one).
site="$("$NEURON_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
while IFS= read -r line; do
	[[ "$line" == *==* ]] || continue
	name="${line%%==*}" want="${line#*==}"
	have="$("$NEURON_VENV/bin/python" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')"
	[[ "$have" == "$want" ]] || die "$name is ${have:-missing} after the install, pinned $want"
done <"$source_dir/nxdt-requirements.txt"

# NxDT's install_setup.sh patches NeMo with sed. Fixed-string edits here, each checked: the pinned NeMo
# must carry the line (or already be patched), and the line must be gone afterwards.
while IFS=$'\t' read -r path pattern replacement; do
	[[ -n "$path" && "$path" != \#* ]] || continue
	target="$site/$path"
	[[ -f "$target" ]] || die "NeMo patch: $path is not installed"
	if grep -qF -- "$pattern" "$target"; then
		PATTERN="$pattern" REPLACEMENT="$replacement" "$NEURON_VENV/bin/python" - "$target" <<'PY'
import os, sys
path = sys.argv[1]
with open(path) as f:
    text = f.read()
with open(path, "w") as f:
    f.write(text.replace(os.environ["PATTERN"], os.environ["REPLACEMENT"]))
PY
		! grep -qF -- "$pattern" "$target" || die "NeMo patch of $path did not apply"
		echo "nxdt_install: patched $path" >&2
	else
		echo "nxdt_install: $path already patched" >&2
	fi
done <"$source_dir/nxdt-patches.tsv"

cp "$source_dir/nxdt-requirements.txt" "$NEURON_VENV/nxdt-stack.txt"
echo "nxdt_install: NxDT stack installed in $NEURON_VENV from $NXDT_WHEELHOUSE" >&2
