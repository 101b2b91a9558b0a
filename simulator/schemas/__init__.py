"""JSON Schemas shipped with the package (package data)."""
