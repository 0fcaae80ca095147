"""Collection: SSH fan-out over the hosts of a run into one Parquet dataset."""
