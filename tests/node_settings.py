"""Settings every OpenSearch node started by the tests gets, single or in a cluster."""

# OpenSearch's disk watermarks default to a share of the disk used: past 85 % no replica is
# allocated, past 90 % shards move away, past 95 % every index turns read-only. The tests run on
# shared machines whose disk is often that full, though tens of GB are free, and a 3-node
# cluster then stays yellow (CI of stop 56: 3 replicas unassigned at 84 % used). Absolute free
# space keeps the disk monitor on, as in production, but measures what the tests need: room to
# write, not a share of someone else's disk. All three must be bytes or all shares.
DISK_WATERMARKS = {
    "cluster.routing.allocation.disk.watermark.low": "2gb",
    "cluster.routing.allocation.disk.watermark.high": "1gb",
    "cluster.routing.allocation.disk.watermark.flood_stage": "512mb",
}
