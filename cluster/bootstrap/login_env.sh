#!/usr/bin/env bash
# The head node's login environment, from a release on shared storage (run by head_node.sh from the payload):
#
#   login_env.sh launchers RELEASE            RELEASE/bin: a launcher per entry point of RELEASE/pyproject.toml
#                                             ([project.scripts]: llm-submit, llm-plan, ...), run by the release's
#                                             env with its deployment spec, and the env's own commands the runbook
#                                             uses on the head node (tensorboard, pinned in requirements-node.txt)
#   login_env.sh profile CURRENT PROFILE_D    PROFILE_D/llm-training.sh: LLM_TRAINING_HOME, LLM_TRAINING_SPEC and
#                                             CURRENT/bin on PATH for every login shell (CURRENT: the symlink that
#                                             names the live release)
#
# No install step: the release's packages are on its env's path (head_node.sh writes the .pth file).
set -euo pipefail

# The env's own console scripts that the docs run on the head node (docs/jobs.md: tensorboard --logdir ...).
ENV_COMMANDS=(tensorboard)

die() {
	echo "head_node: $*" >&2
	exit 1
}
log() { echo "head_node: $*" >&2; }

launchers() {
	local release="$1" quoted name target entry_points
	[[ -f "$release/pyproject.toml" ]] || die "$release lacks pyproject.toml (the release's entry points)"
	install -d "$release/bin"
	quoted="$(printf %q "$release")"
	entry_points="$("$release/.venv/bin/python" -I -c '
import sys, tomllib
with open(sys.argv[1], "rb") as file:
    for name, target in tomllib.load(file)["project"]["scripts"].items():
        print(name, target)' "$release/pyproject.toml")" || die "$release/pyproject.toml: no [project.scripts]"
	while read -r name target; do
		[[ "$name" =~ ^[a-z][a-z0-9-]*$ && "$target" =~ ^[a-z_][a-z0-9_.]*:[a-z_][a-z0-9_]*$ ]] ||
			die "pyproject.toml: entry point '$name = $target' is not name = module:function"
		cat >"$release/bin/$name" <<-EOF
			#!/usr/bin/env bash
			# Installed by head_node.sh from the release's pyproject.toml: $name = $target
			export LLM_TRAINING_SPEC="\${LLM_TRAINING_SPEC:-$quoted/deployment.yaml}"
			exec $quoted/.venv/bin/python -c 'import sys; sys.argv[0] = "$name"; from ${target%%:*} import ${target##*:}; sys.exit(${target##*:}())' "\$@"
		EOF
		chmod 0755 "$release/bin/$name"
	done <<<"$entry_points"
	# The env's console scripts name their interpreter by absolute path: a relative link is all they need.
	for name in "${ENV_COMMANDS[@]}"; do
		if [[ -x "$release/.venv/bin/$name" ]]; then
			ln -sfn "../.venv/bin/$name" "$release/bin/$name"
		else
			log "$name is not in the env of $release (its requirements file does not pin it): not on PATH"
		fi
	done
}

profile() {
	local current="$1" profile_d="$2"
	install -d -m 0755 "$profile_d"
	cat >"$profile_d/llm-training.sh.new" <<-EOF
		# Installed by head_node.sh: the training package on shared storage, its deployment spec and commands.
		export LLM_TRAINING_HOME="$current"
		export LLM_TRAINING_SPEC="$current/deployment.yaml"
		case ":\$PATH:" in *":$current/bin:"*) ;; *) export PATH="$current/bin:\$PATH" ;; esac
	EOF
	chmod 0644 "$profile_d/llm-training.sh.new"
	mv "$profile_d/llm-training.sh.new" "$profile_d/llm-training.sh"
}

case "${1:-}" in
launchers)
	[[ $# -eq 2 ]] || die "usage: login_env.sh launchers RELEASE"
	launchers "$2"
	;;
profile)
	[[ $# -eq 3 ]] || die "usage: login_env.sh profile CURRENT PROFILE_D"
	profile "$2" "$3"
	;;
*) die "usage: login_env.sh launchers RELEASE | profile CURRENT PROFILE_D" ;;
esac
