"""Deciding: pure functions of an observation (statuses, verdict, actions, plans)."""
