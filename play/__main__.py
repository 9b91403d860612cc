import sys

from play.cli.main import main

sys.exit(main())
