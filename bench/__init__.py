"""Benchmarks of django-emq (run on demand, never part of the test suite)."""
