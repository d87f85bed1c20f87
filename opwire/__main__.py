"""`python -m opwire` (what `torchrun -m opwire record ...` runs in every rank)."""

import sys

from opwire.cli import main

sys.exit(main())
