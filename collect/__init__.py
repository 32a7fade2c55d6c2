"""The telemetry collector: a drift-free sampler of CPU, memory, disk, network, thermal and GPU metrics.

`python -m collect run|sample|timed ...` on the command line; `collect.session.run_session` from code.
Importing this package loads no hardware library (NVML is imported when a collector starts).
"""
