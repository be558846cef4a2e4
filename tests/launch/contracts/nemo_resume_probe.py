"""Runs in .nemo-venv (NeMo 2.4.0, the nemo:25.07 container's version), never in the repo's venv
(tests/training/checkpoint/test_framework_replica.py):

    nemo_resume_probe.py CHECKPOINTS_DIR [...]

Which checkpoint NeMo 2 resumes from in each CHECKPOINTS_DIR, by its own AutoResume (resume_if_exists, the directory as
resume_from_directory): a `*last` checkpoint directory without an `-unfinished` marker. Prints one JSON line: the
list, in the order given.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    from nemo.lightning.resume import AutoResume

    found = []
    for directory in sys.argv[1:]:
        resume = AutoResume(resume_from_directory=directory, resume_if_exists=True)
        found.append(str(resume._find_trainer_ckpt_path()))
    print(json.dumps({"resumes_from": found}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
