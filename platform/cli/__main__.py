"""``python -m linkstream.cli``: the ``linkstream`` command."""

import sys

from linkstream.cli.main import main

sys.exit(main())
