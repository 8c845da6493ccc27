from __future__ import annotations

from forkctl.cli import main

if __name__ == "__main__":
    main()
