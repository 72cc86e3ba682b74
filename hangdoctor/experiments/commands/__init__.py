"""The verbs of experiments, hosted by `hangdoctor` (hangdoctor/commands/__init__.py lists them)."""
