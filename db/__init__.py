"""Persistence (crosswalk store, stored runs). Populated by the curation and dashboard issues."""
