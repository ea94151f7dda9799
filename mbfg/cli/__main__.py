"""``python -m mbfg.cli``: the same command line as the ``mbfg`` script (and ``python -m mbfg``)."""

import sys

from mbfg.cli import main

sys.exit(main())
