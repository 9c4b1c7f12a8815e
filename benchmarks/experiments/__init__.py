"""Experiments that served one decision (a merge rule, a refactoring's cost, a paper's toy
result reproduced); their conclusions are in the documentation and their results in
benchmarks/results/. Run one as ``python -m benchmarks.experiments.NAME``."""
