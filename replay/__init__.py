"""replay: tooling around recorded runs, and the `agentsm` command line."""

__all__: list[str] = []
