"""`python -m ptxtool` runs the command line, as the `ptxtool` script does."""

from ptxtool.program import run

run()
