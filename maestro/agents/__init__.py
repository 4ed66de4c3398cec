"""agents/."""
