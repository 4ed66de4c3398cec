"""training/."""
