"""``python -m mbfg``: the same command line as the ``mbfg`` script."""

import sys

from mbfg.cli import main

sys.exit(main())
