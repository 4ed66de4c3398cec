"""storage/."""
