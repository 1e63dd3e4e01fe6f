"""`python -m replay.torture`: see `replay.torture.cli`."""

from .cli import main

if __name__ == "__main__":
    main()
