import sys

from melo_core.cli import main

sys.exit(main())
