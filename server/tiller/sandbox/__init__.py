"""Commands in an OS sandbox (bubblewrap on Linux): the settings, the availability probe, the
bwrap command line and how one command runs (protocol.md, "Sandbox")."""
