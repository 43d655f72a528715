import sys

from logbroker.cli import main

sys.exit(main())
