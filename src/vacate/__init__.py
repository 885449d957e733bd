"""vacate: is anything still using this volume, and how do I retire it safely?"""

__version__ = "0.1.0"
