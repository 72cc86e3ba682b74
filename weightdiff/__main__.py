from weightdiff.cli import console_script

console_script()
