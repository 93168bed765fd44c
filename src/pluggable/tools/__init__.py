"""Tools for plugin authors: the conformance suite (and, beside it, the command line's
doctor and demo)."""
