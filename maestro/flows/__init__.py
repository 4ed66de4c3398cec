"""flows/."""
