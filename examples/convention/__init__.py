"""Prototypes for issue 7 (scale-out on a Thespian convention); see docs/scale-out-research.md."""
