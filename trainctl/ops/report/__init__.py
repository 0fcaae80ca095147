"""`trainctl report RUN`: one self-contained HTML file (findings, heat-maps, hang maps, coverage)."""
