"""Evaluation and the leaderboard, one job per module.

``suites`` (suite files), ``plan`` (the episodes of a run, shards), ``provenance`` (what made a
run), ``backends`` (an agent's model backends), ``output`` (the episodes file a run appends
to), ``evaluate`` (``RunConfig`` and ``evaluate``), ``distributed`` (Ray workers), ``results``
(reading, summarising and merging results folders), ``stats`` (paired differences between
runs) and ``render`` (the leaderboard).
"""
