"""Runnable examples (a package so actor processes can import their node functions)."""
