import sys

from toylab.cli.main import run

sys.exit(run())
