"""Acting on an approved plan: the building blocks ``apply`` calls (delete, snapshot)."""
