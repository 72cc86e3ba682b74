"""hangdoctor's corpus: hangs recorded with real py-spy, each with where it comes from and its expected verdict.

See README.md in this folder for the layout of a case and the language of its expectations.
"""
