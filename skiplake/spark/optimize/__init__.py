"""OPTIMIZE: bin-packing small files, Z-order along a curve, and incremental clustering of
clustered tables, each staged into one transaction."""
