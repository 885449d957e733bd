from vacate.cli.main import entry

entry()
