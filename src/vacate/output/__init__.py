"""Rendering results: versioned JSON for machines, rich tables for people."""
