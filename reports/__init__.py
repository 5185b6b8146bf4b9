"""Reports: tables in, terminal/HTML documents out; they compute nothing."""
