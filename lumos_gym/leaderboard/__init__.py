"""Evaluation and the leaderboard: suites, episode plans, the run loop, results, Ray, rendering."""
