"""``python -m parrot_parents``."""

import sys

from parrot_parents.cli.main import main

sys.exit(main())
