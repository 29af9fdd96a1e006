"""`python -m btserver`: the bt-server command (how `bt-server share` starts a daemon, whatever PATH holds)."""

import sys

from btserver.cli import main

if __name__ == "__main__":
    sys.exit(main())
