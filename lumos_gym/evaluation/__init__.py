"""Running evaluations: plan, run, resume, shard and merge them, and what a run writes.

Light to import (no agent, model, training or conversion code), and read by the leaderboard
too: ``suites`` (suite files), ``folders`` (default results folders, ``results/latest``),
``results`` (reading results folders: episode keys and statuses), ``summary`` (metrics with
intervals, the suite score), ``identity`` (a run's fingerprint and adapter weights, portable
paths), ``merge`` (the shards of a run joined) and ``plan`` (the episodes of a run, shards;
what planning needs is imported when it plans). The run machinery: ``provenance`` (what made a
run), ``backends`` (an agent's model backends), ``usage`` (model calls and the request cache),
``output`` (the episodes file a run appends to), ``evaluate`` (``RunConfig`` and
``evaluate``), ``distributed`` (Ray workers), ``rescore`` (episodes scored again) and
``restrict`` (a folder cut down to a suite). The records are :mod:`lumos_gym.episodes`.
"""
