import sys

from logbroker.cli.main import main

sys.exit(main())
