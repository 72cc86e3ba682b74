"""Analysis: pure functions from rank dumps to diff and check reports (no rendering, no CLI)."""
