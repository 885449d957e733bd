"""The core: runs collectors, parsers and recognisers and returns results as values.
Prints nothing."""
