"""Agents and the model backends they ask for completions."""
