from __future__ import annotations

import sys

if __name__ == "__main__":
    try:
        from forkctl.cli import main
    except KeyboardInterrupt:  # Ctrl-C while the CLI's own modules load: no traceback, as any later
        sys.stderr.write("forkctl: interrupted (Ctrl-C)\n")
        sys.exit(130)
    main()
