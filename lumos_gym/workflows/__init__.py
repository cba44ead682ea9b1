"""Workflows that call the layers below: ``reproduce`` and ``play``."""
