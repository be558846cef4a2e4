"""The people of the cluster on every node: the accounts script rendered from cluster.users and cluster.groups.

`accounts_script` is a bash script the payload carries (users/accounts.sh). head_node.sh runs it from the payload
(making homes: /home is the head node's, NFS-shared with the compute nodes) and every compute node's bootstrap runs
it from the release on shared storage, so each node has the same groups and users with the same gid and uid, and
ownership on /fsx means one person everywhere. It may run any number of times: it adds what is missing, sets each
user's groups to the spec's, and fails, naming both, when a name or id is taken by another account (never renumbers
or removes an account: files on /fsx carry the ids). sudo belongs to the spec's admins alone: their
/etc/sudoers.d/90-llm-admins, and ssm-user's sudo (Session Manager's default account, which the agent makes a
sudoer) is taken away once people log in as themselves.

    python -m cluster.users [SPEC.yaml]

prints the script for a spec.
"""

from __future__ import annotations

import shlex
import sys

from spec.cli import OneLineParser, user_errors
from spec.errors import UserError
from spec.load import load_spec
from spec.users import GroupSpec, UserSpec

ADMINS_SUDOERS = "90-llm-admins"
# What the SSM agent writes when it creates ssm-user (ssm-user ALL=(ALL) NOPASSWD:ALL); an existing file is kept.
SSM_AGENT_SUDOERS = "ssm-agent-users"

_HEADER = """#!/usr/bin/env bash
# Rendered by cluster.users from cluster.users and cluster.groups; run as root by head_node.sh (CREATE_HOMES=true)
# and by every compute node's bootstrap. Idempotent: adds what is missing, sets each user's groups, never renumbers
# or removes an account. ACCOUNTS_ROOT runs useradd/groupadd --root on another tree (the tests' sandbox).
set -euo pipefail
ACCOUNTS_ROOT="${ACCOUNTS_ROOT:-}"
CREATE_HOMES="${CREATE_HOMES:-false}"
SUDOERS_D="${SUDOERS_D:-$ACCOUNTS_ROOT/etc/sudoers.d}"
root_args=()
[[ -z "$ACCOUNTS_ROOT" ]] || root_args=(--root "$ACCOUNTS_ROOT")

die() {
	echo "accounts: $*" >&2
	exit 1
}

# The field (3: the id) of NAME's entry in /etc/passwd or /etc/group, and the name holding an ID.
id_of() { awk -F: -v name="$2" '$1 == name { print $3; exit }' "$ACCOUNTS_ROOT/etc/$1"; }
name_of() { awk -F: -v id="$2" '$3 == id { print $1; exit }' "$ACCOUNTS_ROOT/etc/$1"; }

ensure_group() {
	local name="$1" gid="$2" found holder
	found="$(id_of group "$name")"
	if [[ -n "$found" ]]; then
		[[ "$found" == "$gid" ]] || die "group $name has gid $found on this node, the spec says $gid: renumber it by hand (files carry gids)"
		return 0
	fi
	holder="$(name_of group "$gid")"
	[[ -z "$holder" ]] || die "gid $gid of group $name is group $holder's on this node"
	groupadd "${root_args[@]}" --gid "$gid" "$name"
	echo "accounts: added group $name (gid $gid)"
}

ensure_user() {
	local name="$1" uid="$2" group="$3" groups="$4" found holder home=(--no-create-home)
	found="$(id_of passwd "$name")"
	if [[ -n "$found" ]]; then
		[[ "$found" == "$uid" ]] || die "user $name has uid $found on this node, the spec says $uid: renumber it by hand (files carry uids)"
		usermod "${root_args[@]}" --gid "$group" --groups "$groups" "$name"
		return 0
	fi
	holder="$(name_of passwd "$uid")"
	[[ -z "$holder" ]] || die "uid $uid of user $name is user $holder's on this node"
	# Mode 700 whatever login.defs says (Debian's 755): another user has no business in a home.
	[[ "$CREATE_HOMES" != true ]] || home=(--create-home --key HOME_MODE=0700)
	useradd "${root_args[@]}" --uid "$uid" --gid "$group" --groups "$groups" --shell /bin/bash \\
		--home-dir "/home/$name" "${home[@]}" "$name"
	echo "accounts: added user $name (uid $uid, group $group${groups:+, groups $groups})"
}

# sudoers.d files are read only when mode 0440 and root's; written whole, renamed into place.
write_sudoers() {
	local name="$1" content="$2" staged
	[[ -d "$SUDOERS_D" ]] || install -d -m 0750 "$SUDOERS_D"
	staged="$(mktemp "$SUDOERS_D/.$name.XXXXXX")"
	printf '%s' "$content" >"$staged"
	chmod 0440 "$staged"
	if command -v visudo >/dev/null && ! visudo -c -q -f "$staged"; then
		rm -f "$staged"
		die "visudo refuses the rendered $SUDOERS_D/$name"
	fi
	mv -f "$staged" "$SUDOERS_D/$name"
}
"""


def _sudoers(users: list[UserSpec]) -> str:
    lines = ["# Rendered by cluster.users: sudo for the admins of cluster.users (admin: true), and no one else.\n"]
    lines += [f"{user.name} ALL=(ALL) NOPASSWD: ALL\n" for user in users if user.admin]
    return "".join(lines)


def accounts_script(users: list[UserSpec], groups: list[GroupSpec]) -> str:
    """The bash script that creates the spec's groups and users on a node (see the module's docstring)."""
    body = [_HEADER, "\n# ---- groups, then users (a user's groups must exist first) ----\n"]
    body += [f"ensure_group {shlex.quote(group.name)} {group.gid}\n" for group in groups]
    for user in users:
        extra = ",".join(name for name in user.groups if name != user.group)
        body.append(f"ensure_user {shlex.quote(user.name)} {user.uid} {shlex.quote(user.group)} {shlex.quote(extra)}\n")
    body.append("\n# ---- sudo: the admins' file; ssm-user keeps none once people log in as themselves ----\n")
    body.append(f"write_sudoers {ADMINS_SUDOERS} {shlex.quote(_sudoers(users))}\n")
    if users:
        ssm = "# Rendered by cluster.users: Session Manager runs as each person's own account; ssm-user has no sudo.\n"
        body.append(f"write_sudoers {SSM_AGENT_SUDOERS} {shlex.quote(ssm)}\n")
    body.append(f'echo "accounts: {len(groups)} groups, {len(users)} users as cluster.users says"\n')
    return "".join(body)


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m cluster.users", description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?", help="a deployment spec (default: spec/default.yaml)")
    args = parser.parse_args(argv)
    spec = load_spec(args.spec)
    if spec.cluster is None:
        raise UserError(f"cluster: {args.spec or 'the default spec'} deploys no cluster")
    sys.stdout.write(accounts_script(spec.cluster.users, spec.cluster.groups))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
