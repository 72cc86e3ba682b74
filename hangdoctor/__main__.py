import sys

from hangdoctor.cli import main

sys.exit(main())
