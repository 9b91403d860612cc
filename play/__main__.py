import sys

from play.cli import main

sys.exit(main())
