import sys

from toylab.cli import main

sys.exit(main())
