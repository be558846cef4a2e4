"""The recorded NxDT config contract (nxdt-contract.yaml) and the check of a rendered config against it.

NxDT cannot be installed here (Neuron's own pip repository), so the facts come from its source at a recorded
commit. `python -m launch.nxdt_contract --source <neuronx-distributed-training checkout>` prints the
keys of that checkout's Megatron example configs, to refresh `example_keys` for a new Neuron release.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from spec.cli import OneLineParser, user_errors

RECORD = Path(__file__).with_name("nxdt-contract.yaml")


@cache
def load_record(path: Path = RECORD) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def flatten(config: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted leaf keys; a non-empty mapping is a section, anything else (lists, null) a value."""
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from flatten(value, dotted + ".")
        else:
            yield dotted, value


def contract_problems(config: dict[str, Any], record: dict[str, Any] | None = None) -> list[str]:
    """One line per key NxDT would miss, not know, overwrite, or reject the value of."""
    record = record or load_record()
    rendered = dict(flatten(config))
    known = set(record["required"]) | set(record["read_with_default"]) | set(record["example_keys"])
    problems = [
        f"{key}: NxDT reads it without a default; it is missing" for key in record["required"] if key not in rendered
    ]
    problems += [f"{key}: not a key NxDT reads" for key in rendered if key not in known | set(record["ignored"])]
    problems += [f"{key}: NxDT overwrites it ({why})" for key, why in record["ignored"].items() if key in rendered]
    for key, allowed in record["allowed_values"].items():
        if key in rendered and rendered[key] not in allowed:
            problems.append(f"{key}: {rendered[key]!r} is not one of {', '.join(map(str, allowed))}")
    return problems


def finetune_refusal(mode: str, record: dict[str, Any] | None = None) -> str | None:
    """Why `llm-submit --backend neuron` cannot render a finetune: section from the recorded contract, or None once
    the record holds what rendering it needs: LoRA keys for lora; for full fine-tuning, what NxDT's SFT data module
    reads and how it loads a base checkpoint (required or read_with_default keys, not example-config names alone)."""
    record = record or load_record()
    release = record["source"]["release"].split(" (")[0]
    read = set(record["required"]) | set(record["read_with_default"])
    if mode == "lora" and not any("lora" in key or "peft" in key for key in record["example_keys"]):
        return (
            f"finetune.mode: 'lora' is not supported on --backend neuron: the recorded NxDT contract ({release}, "
            "launch/nxdt-contract.yaml) has no LoRA/PEFT keys; fine-tune with LoRA on --backend fsdp or nemo"
        )
    if not any(key.startswith("data.") and ("sft" in key or "train_dir" in key) for key in read):
        return (
            f"finetune.mode: {mode!r} is not supported on --backend neuron: the recorded NxDT contract ({release}, "
            "launch/nxdt-contract.yaml) names SFT keys only from NxDT's example configs, not what its SFT data module "
            "reads or how it loads a base checkpoint; fine-tune on --backend fsdp or nemo"
        )
    return None


def example_keys(source: Path) -> list[str]:
    keys: set[str] = set()
    for path in sorted((source / "examples" / "conf").glob("megatron_*.yaml")):
        keys.update(key for key, _ in flatten(yaml.safe_load(path.read_text(encoding="utf-8"))))
    return sorted(keys)


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description="Print NxDT's example-config keys (for nxdt-contract.yaml).")
    parser.add_argument("--source", required=True, type=Path, help="a neuronx-distributed-training checkout")
    args = parser.parse_args(argv)
    print(yaml.safe_dump({"example_keys": example_keys(args.source)}, sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
