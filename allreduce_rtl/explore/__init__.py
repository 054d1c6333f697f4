"""Design-space exploration (``allreduce-rtl explore``): a TOML spec (``spec``) expanded into
points, each evaluated as one task (``evaluate``) on a Dask cluster (``engine``), written to a
SQLite store (``store``) and summarised with plots (``report``). docs/explore.md."""
