"""Crash-and-restart drills (see VM_RECOVERY_TESTS.md); also run by the test suite."""
