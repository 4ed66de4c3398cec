"""maestro: verified environments for tool-calling agents, and training on them."""

__version__ = "0.1.0"
