"""Benchmarks (``make bench``): speed and size figures for the README, never timed assertions in tests."""
