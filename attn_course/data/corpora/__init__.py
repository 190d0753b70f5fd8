"""Data files the course ships: the Tatoeba English-French sample (see README.md here for its licence)."""
