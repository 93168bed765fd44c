"""The package's version, which the probe's cached verdicts record (a new host probes again)."""
__version__ = "0.1.0"
