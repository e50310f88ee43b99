"""Benchmarks (``make bench``): speed and size figures for the README, never timed assertions in tests."""


def cpu_seconds(pid: int) -> float:
    """CPU-seconds (user + system) process ``pid`` (the benchmark's server) has used so far."""
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system
