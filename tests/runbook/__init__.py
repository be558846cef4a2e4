"""The executable runbook: every fenced block of README.md and docs/*.md, tagged by where it runs and checked
from the files themselves (tests/test_runbook.py). docs/runbook-tests.md says what each tag means."""
