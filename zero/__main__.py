import sys

from zero.cli import main

sys.exit(main())
