"""Drills: the guarantees attacked with real parts (marked ``drill``; ``pytest -m drill``)."""
