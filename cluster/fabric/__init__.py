"""Fabric checks: an all-reduce benchmark across nodes (nccl-tests on GPU, nccom-test on Trainium) judged by its bus
bandwidth against the instance type's floor and by the EFA hardware counters sampled before and after it.

`python -m cluster.fabric render|check` (cli.py); thresholds.py holds the rule, parsers.py reads the tools' output,
counters.py the sysfs samples, check.py the verdict, render.py and the .sh files the job script.
"""
