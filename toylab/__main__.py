import os
import sys

from toylab.cli.main import main

try:
    status = main()
    sys.stdout.flush()
except BrokenPipeError:          # the reader closed the pipe (``| head``): stop quietly, as Unix tools do
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    status = 1
sys.exit(status)
