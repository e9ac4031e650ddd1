import sys

from melo_core.cli.main import main

sys.exit(main())
