"""Drills: races, faults and attacks run against the real engine and the real API, each
asserting its outcome and recording its figures (``tests.drills.results.record``). Marked
``drill``: ``make drills`` runs them with the figures written to ``bench/results/drills/``."""
