"""Pure analysis over RankTrace records: `last` (where every rank is now) and `diverge` (where ranks part ways)."""
