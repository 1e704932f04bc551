import sys

from toylab.cli.main import main

sys.exit(main())
