"""Observing: everything that reads the machine about one volume.

Standard library only and CPython 3.8+: this package ships alone (``vacate payload``) to a
host where nothing of vacate is installed and runs there under its ``python3``.
"""
