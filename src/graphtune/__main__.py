import sys

from graphtune.cli import main

sys.exit(main())
