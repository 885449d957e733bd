"""Flows that join the layers for one command: observe (here or elsewhere), then decide."""
