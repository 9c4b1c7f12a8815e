"""olcli's benchmarks, side by side against VW (or the stated floor); see benchmarks/README.md.

Run one from the repository root: ``python -m benchmarks.NAME [options]``. What they share
(running and measuring olcli and VW, the data, the results files) is ``benchmarks.harness``.
"""
