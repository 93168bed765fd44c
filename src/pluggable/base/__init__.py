"""Floor 2: what every higher floor uses — the exceptions (`errors`), element types
(`dtypes`), the host's limits and environment variables (`limits`), small value classes
(`record`), the package version, and the runtime library with its compiled companion
`pluggable._compiled` (`native`)."""
