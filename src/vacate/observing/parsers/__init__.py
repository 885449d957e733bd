"""Pure parsers: text or bytes in, frozen values out. No I/O. Standard library only."""
