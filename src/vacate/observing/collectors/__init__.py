"""Platform reading: /proc, /sys, the filesystem, config files. Standard library only, so these
modules can run on any Linux host with ``python3`` (locally or over ``ssh host python3 -``)."""
