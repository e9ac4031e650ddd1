import sys

from melo_core.cli.commands import main

sys.exit(main())
