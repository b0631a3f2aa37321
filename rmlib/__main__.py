"""`python -m rmlib ...`: the same command line as the `rmlib` console script."""

import sys

from rmlib.cli import main

sys.exit(main())
