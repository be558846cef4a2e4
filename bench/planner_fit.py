"""`python -m bench.planner_fit [--evaluations N] [--repeats N]`: what one evaluation of the planner's fit loss costs.

The fit (planner/fit.py, Nelder-Mead) and leave-one-source-out validation (planner/validate.py) evaluate the loss over
every fitted published row tens of thousands of times; its cost sets how long `python -m planner.validate` and the
planner tests take. Prints the best of REPEATS runs of N evaluations, in milliseconds of CPU time per evaluation
(CPU time, so a busy machine slows it less than wall time).
"""

from __future__ import annotations

import time

from planner.calibration import CALIBRATED
from planner.fit import fitted_rows, loss
from spec.cli import OneLineParser, user_errors


def best_ms_per_loss(evaluations: int, repeats: int) -> float:
    rows = fitted_rows()
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(evaluations):
            loss(CALIBRATED, rows)
        best = min(best, (time.process_time() - start) / evaluations * 1000)
    return best


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m bench.planner_fit", description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    for name in ("evaluations", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: {getattr(args, name)} must be at least 1")
    ms = best_ms_per_loss(args.evaluations, args.repeats)
    rows = len(fitted_rows())
    print(f"planner fit loss over {rows} fitted rows: {ms:.2f} ms CPU per evaluation "
          f"(best of {args.repeats} x {args.evaluations})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
