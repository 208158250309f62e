"""The command-line commands, one module per group; each module has `register(subparsers)`."""
