"""Reading finished runs: the leaderboard, its checks, statistics and views.

``render`` (the board: md, csv, html, png, ``--validate``, ``--compare``), ``stats`` (paired
differences between runs), ``agreement`` (how alike two runs' outputs are), ``attribution``
(failed episodes attributed to modules), ``claims`` (the paper's claims tested), ``cards``
(training and seed cards), ``viewer`` (``lumos-gym view``) and ``agents`` (what a board reads
of an agent by its name). Results folders are read through the light modules of
:mod:`lumos_gym.evaluation` (``results``, ``summary``, ``suites``, ``identity``); reading,
validating and rendering a board imports none of the run machinery.
"""
