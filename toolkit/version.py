"""lltrace's version (a leaf: parsers and the run metadata read it without loading the analysis stack)."""

__version__ = "0.1.0"
