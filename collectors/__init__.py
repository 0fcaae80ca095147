"""Collectors: bring each host's signals into Parquet.

Each collector is a remote command plus a pure parser tested on recorded output (pyinfra facts
style). Fan-out returns per-host outcomes and never dies on the first bad host; every host x kind
outcome lands in `collection_status`.
"""
