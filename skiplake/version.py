"""The package version: one place, read by pyproject.toml, the CLI and every commit's engineInfo."""
__version__ = "0.1.0"
