"""``python -m flowray.cli``: the ``flowray`` command."""

from flowray.cli import main

if __name__ == "__main__":
    main(prog_name="flowray")
