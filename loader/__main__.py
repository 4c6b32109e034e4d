"""`python -m loader`: the same as the `loader` command."""

from loader.cli import cli

if __name__ == "__main__":
    cli()
