"""Taking a host out of service: the quarantine ledger, scheduler drains, the relaunch plan without it."""
