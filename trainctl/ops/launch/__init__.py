"""Starting and supervising runs: the local launcher, the multi-host supervisor, acting on a live run."""
