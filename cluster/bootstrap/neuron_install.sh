#!/usr/bin/env bash
# Install the Neuron SDK at exact versions: driver (aws-neuronx-dkms), runtime, collectives and tools
# from Neuron's apt/yum repository, torch-neuronx and neuronx-cc from Neuron's pip index into
# NEURON_VENV. Needs internet egress: run it in the AMI build (pcluster build-image, see
# cluster/image_config.py) or let trn1_node.sh run it on nodes that have egress.
#
#   NEURON_PINS=aws-neuronx-dkms=2.24.7.0,...,neuronx-cc=2.21.33363.0 neuron_install.sh
set -euo pipefail

NEURON_PINS="${NEURON_PINS:-${1:-}}"
NEURON_VENV="${NEURON_VENV:-/opt/neuron-venv}"
OS_RELEASE="${OS_RELEASE:-/etc/os-release}"

die() {
	echo "neuron_install: $*" >&2
	exit 1
}

[[ -n "$NEURON_PINS" ]] || die "NEURON_PINS is empty: pass name=version pairs (cluster.neuron pins)"
declare -A pin=()
IFS=',' read -r -a pairs <<<"$NEURON_PINS"
for pair in "${pairs[@]}"; do
	[[ "$pair" == *=* ]] || die "pin '$pair' is not name=version"
	pin["${pair%%=*}"]="${pair#*=}"
done
system_packages=(aws-neuronx-dkms aws-neuronx-runtime-lib aws-neuronx-collectives aws-neuronx-tools)
python_packages=(torch-neuronx neuronx-cc)
for name in "${system_packages[@]}" "${python_packages[@]}"; do
	[[ -n "${pin[$name]:-}" ]] || die "no pin for $name in NEURON_PINS"
done

# shellcheck source=/dev/null
. "$OS_RELEASE"
case "${ID:-}" in
ubuntu)
	install -d -m 0755 /etc/apt/keyrings
	curl -fsSL https://apt.repos.neuron.amazonaws.com/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB |
		gpg --dearmor --yes -o /etc/apt/keyrings/neuron.gpg
	echo "deb [signed-by=/etc/apt/keyrings/neuron.gpg] https://apt.repos.neuron.amazonaws.com ${VERSION_CODENAME} main" \
		>/etc/apt/sources.list.d/neuron.list
	apt-get update -q
	apt-get install -y -q "linux-headers-$(uname -r)" python3-venv
	specs=()
	for name in "${system_packages[@]}"; do specs+=("$name=${pin[$name]}*"); done
	apt-get install -y -q --allow-change-held-packages "${specs[@]}"
	apt-mark hold "${system_packages[@]}"
	;;
amzn | rhel | rocky)
	cat >/etc/yum.repos.d/neuron.repo <<'REPO'
[neuron]
name=Neuron YUM Repository
baseurl=https://yum.repos.neuron.amazonaws.com
enabled=1
gpgcheck=1
gpgkey=https://yum.repos.neuron.amazonaws.com/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB
REPO
	dnf install -y -q "kernel-devel-$(uname -r)" python3
	specs=()
	for name in "${system_packages[@]}"; do specs+=("$name-${pin[$name]}*"); done
	dnf install -y -q "${specs[@]}"
	;;
*) die "unsupported OS '${ID:-unknown}' in $OS_RELEASE" ;;
esac

python3 -m venv "$NEURON_VENV"
"$NEURON_VENV/bin/pip" install -q --extra-index-url https://pip.repos.neuron.amazonaws.com \
	"torch-neuronx==${pin[torch-neuronx]}" "neuronx-cc==${pin[neuronx-cc]}"
echo "neuron_install: installed ${NEURON_PINS//,/ }" >&2
