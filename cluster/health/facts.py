"""Render the health-check settings (KEY=value lines read by cluster/health/lib.sh) for an instance type.

On a cluster node: `python -m cluster.health.facts --instance-type p5.48xlarge > /etc/llm-health/health.env`
(the node's bootstrap does this once); the prolog and epilog then compare the node with these counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass

from spec.cli import OneLineParser, user_errors
from spec.errors import UserError
from spec.platform.instances import InstanceFacts, UnknownInstanceType, instance_facts

DEFAULT_CONFIG_PATH = "/etc/llm-health/health.env"
DEFAULT_MIN_FSX_FREE_GIB = 100  # a checkpoint of a 70B model with optimizer state is about 1 TiB; warn well before
DEFAULT_MIN_SCRATCH_FREE_GIB = 20  # enroot images and compile caches unpack here


@dataclass(frozen=True)
class HealthSettings:
    expected_gpus: int
    expected_neuron: int
    expected_efa: int
    fsx_path: str = "/fsx"
    min_fsx_free_gib: int = DEFAULT_MIN_FSX_FREE_GIB
    scratch_path: str = "/scratch"
    min_scratch_free_gib: int = DEFAULT_MIN_SCRATCH_FREE_GIB
    kill_stray: bool = True

    @classmethod
    def for_instance(cls, facts: InstanceFacts) -> HealthSettings:
        """Counts from the facts table; paths and thresholds at their defaults (dataclasses.replace them)."""
        return cls(
            expected_gpus=facts.accelerators_per_node if facts.accelerator == "gpu" else 0,
            expected_neuron=facts.accelerators_per_node if facts.accelerator == "neuron" else 0,
            expected_efa=facts.efa_interfaces,
        )

    def render(self, comment: str = "") -> str:
        values = {
            "HEALTH_EXPECTED_GPUS": self.expected_gpus,
            "HEALTH_EXPECTED_NEURON": self.expected_neuron,
            "HEALTH_EXPECTED_EFA": self.expected_efa,
            "HEALTH_FSX_PATH": self.fsx_path,
            "HEALTH_MIN_FSX_FREE_GIB": self.min_fsx_free_gib,
            "HEALTH_SCRATCH_PATH": self.scratch_path,
            "HEALTH_MIN_SCRATCH_FREE_GIB": self.min_scratch_free_gib,
            "HEALTH_KILL_STRAY": int(self.kill_stray),
        }
        for key, value in values.items():
            if isinstance(value, str) and ("\n" in value or "=" in value):
                raise ValueError(f"{key}: {value!r} cannot hold a newline or '='")
        header = f"# {comment}\n" if comment else ""
        return header + "".join(f"{key}={value}\n" for key, value in values.items())


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be 0 or more")
    return value


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m cluster.health.facts", description=__doc__.splitlines()[0])
    parser.add_argument("--instance-type", required=True, help="an instance type from spec/platform/instances.py")
    parser.add_argument("--fsx-path", default="/fsx", help="shared file system to check ('' skips)")
    parser.add_argument("--min-fsx-free-gib", type=_non_negative, default=DEFAULT_MIN_FSX_FREE_GIB)
    parser.add_argument("--scratch-path", default="/scratch", help="node-local scratch ('' skips)")
    parser.add_argument("--min-scratch-free-gib", type=_non_negative, default=DEFAULT_MIN_SCRATCH_FREE_GIB)
    args = parser.parse_args(argv)
    try:
        facts = instance_facts(args.instance_type)
    except UnknownInstanceType as error:
        raise UserError(f"--instance-type: {error}") from None
    settings = dataclasses.replace(
        HealthSettings.for_instance(facts),
        fsx_path=args.fsx_path,
        min_fsx_free_gib=args.min_fsx_free_gib,
        scratch_path=args.scratch_path,
        min_scratch_free_gib=args.min_scratch_free_gib,
    )
    sys.stdout.write(settings.render(f"health-check settings for {facts.name} (python -m cluster.health.facts)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
