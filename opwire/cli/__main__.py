"""`python -m opwire.cli`."""

import sys

from opwire.cli import main

sys.exit(main())
