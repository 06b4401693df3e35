"""What a run leaves behind, read: solver logs, function objects' .dat files, flow fields.
Plain Python, no Django."""
